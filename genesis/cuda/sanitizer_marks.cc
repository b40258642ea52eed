// MarkInitialized through NVTX's memory API (CUDA builds only).

#include "genesis/cuda/sanitizer_marks.h"

#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExtMemCudaRt.h>

namespace genesis::cuda {

void MarkInitialized(const void* ptr, size_t bytes, CUstream_st* stream) {
  if (ptr == nullptr || bytes == 0) return;
  // One domain for the process, made on first use.
  static const nvtxDomainHandle_t domain = nvtxDomainCreateA("genesis");
  nvtxMemVirtualRangeDesc_t range = {};
  range.ptr = ptr;
  range.size = bytes;
  nvtxMemMarkInitializedBatch_t batch = {};
  batch.extCompatID = NVTX_EXT_COMPATID_MEM;
  batch.structSize = sizeof(batch);
  batch.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
  batch.regionDescCount = 1;
  batch.regionDescElementSize = sizeof(range);
  batch.regionDescElements = &range;
  nvtxMemCudaMarkInitialized(domain, stream, /*isPerThreadStream=*/0, &batch);
}

}  // namespace genesis::cuda
