// The CUDA build's pools: cudaMalloc-backed device pools with CUDA-event stream
// ordering, and the pinned host pool; the device pools' virtual memory.
#include <memory>

#include "genesis/core/status.h"
#include "genesis/memory/cuda_backend.h"
#include "genesis/memory/cuda_stream_events.h"
#include "genesis/memory/pinned_backend.h"
#include "genesis/memory/pool_registry.h"

namespace genesis::memory::internal {

absl::StatusOr<std::unique_ptr<CachingAllocator>> MakeDevicePool(int device,
                                                                 const AllocConfig& config) {
  GENESIS_ASSIGN_OR_RETURN(std::unique_ptr<CudaDeviceBackend> backend,
                           CudaDeviceBackend::Create(device));
  GENESIS_ASSIGN_OR_RETURN(std::unique_ptr<CudaStreamEvents> events,
                           CudaStreamEvents::Create(device));
  return CachingAllocator::Create(std::move(backend), config.options, std::move(events));
}

absl::StatusOr<std::unique_ptr<CachingAllocator>> MakePinnedHostPool(const AllocConfig& config) {
  GENESIS_ASSIGN_OR_RETURN(std::unique_ptr<PinnedHostBackend> backend,
                           PinnedHostBackend::Create(config.pinned_mode));
  return CachingAllocator::Create(std::move(backend), config.options);
}

bool CudaReportsPinned(const void* ptr) {
  absl::StatusOr<bool> pinned = PinnedHostBackend::IsPinned(ptr);
  return pinned.ok() && *pinned;
}

}  // namespace genesis::memory::internal

namespace genesis::memory {

absl::StatusOr<CudaVirtualMemory*> DeviceVirtualMemory(int device) {
  GENESIS_ASSIGN_OR_RETURN(CachingAllocator* pool, PoolFor(Device::Cuda(device)));
  if (!pool->expandable_segments()) return nullptr;
  // Device pools are made over a CudaDeviceBackend (MakeDevicePool).
  return static_cast<const CudaDeviceBackend&>(pool->backend()).cuda_virtual_memory();
}

}  // namespace genesis::memory
