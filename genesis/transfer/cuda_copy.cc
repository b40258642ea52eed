// CUDA implementation of internal/cuda_copy.h.
#include <cuda_runtime_api.h>

#include "genesis/core/status.h"
#include "genesis/cuda/device_guard.h"
#include "genesis/cuda/internal/check.h"
#include "genesis/transfer/internal/cuda_copy.h"

namespace genesis::transfer::internal {

absl::Status CudaCopy(void* dst, Device dst_device, const void* src, Device src_device,
                      size_t nbytes, CUstream_st* stream, bool synchronize) {
  // The stream belongs to the CUDA side (the destination for GPU-to-GPU copies).
  const int device = dst_device.is_cuda() ? dst_device.index() : src_device.index();
  GENESIS_ASSIGN_OR_RETURN(cuda::DeviceGuard guard, cuda::DeviceGuard::Create(device));
  if (dst_device.is_cuda() && src_device.is_cuda() && dst_device != src_device) {
    GENESIS_CUDA_RETURN_IF_ERROR_ON(
        device, cudaMemcpyPeerAsync(dst, dst_device.index(), src, src_device.index(),
                                    nbytes, stream));
  } else {
    // Unified addressing tells host from device memory, pinned from pageable.
    GENESIS_CUDA_RETURN_IF_ERROR_ON(
        device, cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault, stream));
  }
  if (synchronize) GENESIS_CUDA_RETURN_IF_ERROR_ON(device, cudaStreamSynchronize(stream));
  return absl::OkStatus();
}

absl::Status CudaSynchronize(int device, CUstream_st* stream) {
  GENESIS_ASSIGN_OR_RETURN(cuda::DeviceGuard guard, cuda::DeviceGuard::Create(device));
  GENESIS_CUDA_RETURN_IF_ERROR_ON(device, cudaStreamSynchronize(stream));
  return absl::OkStatus();
}

}  // namespace genesis::transfer::internal
