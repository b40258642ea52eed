// The CPU-only build's stand-ins for the CUDA pools: each says why it cannot exist.
#include "absl/strings/str_format.h"
#include "genesis/memory/pool_registry.h"

namespace genesis::memory::internal {

absl::StatusOr<std::unique_ptr<CachingAllocator>> MakeDevicePool(int device,
                                                                 const AllocConfig&) {
  return absl::FailedPreconditionError(absl::StrFormat(
      "no memory pool for cuda:%d: genesis was built without CUDA (CPU-only build)", device));
}

absl::StatusOr<std::unique_ptr<CachingAllocator>> MakePinnedHostPool(const AllocConfig&) {
  return absl::FailedPreconditionError(
      "no pinned host memory pool: genesis was built without CUDA (CPU-only build)");
}

bool CudaReportsPinned(const void*) { return false; }

}  // namespace genesis::memory::internal

namespace genesis::memory {

absl::StatusOr<CudaVirtualMemory*> DeviceVirtualMemory(int device) {
  return absl::FailedPreconditionError(absl::StrFormat(
      "no virtual memory for cuda:%d: genesis was built without CUDA (CPU-only build)",
      device));
}

}  // namespace genesis::memory
