// CUDA implementation of internal/cuda_copy.h.
#include <cuda_runtime_api.h>

#include "genesis/core/status.h"
#include "genesis/cuda/device_guard.h"
#include "genesis/cuda/internal/check.h"
#include "genesis/transfer/batch_copy.h"
#include "genesis/transfer/batch_plan.h"
#include "genesis/transfer/cuda_staging_engine.h"
#include "genesis/transfer/internal/cuda_copy.h"
#include "genesis/transfer/staging.h"

namespace genesis::transfer::internal {
namespace {

// True for host memory CUDA does not know (not pinned, not managed).
bool IsPageable(const void* host) {
  cudaPointerAttributes attributes{};
  const cudaError_t err = cudaPointerGetAttributes(&attributes, host);
  if (err != cudaSuccess) {
    cuda::IgnoreCudaError(err);
    return false;  // Let cudaMemcpyAsync decide.
  }
  return attributes.type == cudaMemoryTypeUnregistered;
}

bool IsCapturing(CUstream_st* stream) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  const cudaError_t err = cudaStreamIsCapturing(stream, &capture);
  if (err != cudaSuccess) cuda::IgnoreCudaError(err);
  return err != cudaSuccess || capture != cudaStreamCaptureStatusNone;
}

}  // namespace

absl::Status CudaCopy(void* dst, Device dst_device, const void* src, Device src_device,
                      size_t nbytes, CUstream_st* stream, bool synchronize) {
  // The stream belongs to the CUDA side (the destination for GPU-to-GPU copies).
  const int device = dst_device.is_cuda() ? dst_device.index() : src_device.index();
  GENESIS_ASSIGN_OR_RETURN(cuda::DeviceGuard guard, cuda::DeviceGuard::Create(device));
  if (dst_device.is_cuda() && src_device.is_cuda() && dst_device != src_device) {
    // Through the batch copier: peer access enabled once per pair, or the staged path
    // through pinned host memory where there is none.
    GENESIS_ASSIGN_OR_RETURN(BatchCopier * copier, BatchCopier::Default());
    const CopyRequest request{.src = src,
                              .src_device = src_device,
                              .dst = dst,
                              .dst_device = dst_device,
                              .bytes = nbytes};
    const absl::Span<const CopyRequest> one(&request, 1);
    return synchronize ? copier->Copy(one, dst_device, stream)
                       : copier->CopyAsync(one, dst_device, stream);
  } else if (nbytes >= kPageableStagingMinBytes &&
             (dst_device.is_cpu() || src_device.is_cpu()) &&
             IsPageable(dst_device.is_cpu() ? dst : src) && !IsCapturing(stream)) {
    // Through the staging pipeline, after the work queued on the stream.
    GENESIS_ASSIGN_OR_RETURN(StagingPipeline * pipeline, SharedStagingPipeline(device));
    GENESIS_CUDA_RETURN_IF_ERROR_ON(device, cudaStreamSynchronize(stream));
    return dst_device.is_cpu() ? pipeline->DeviceToHost(dst, src, nbytes)
                               : pipeline->HostToDevice(dst, src, nbytes);
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
