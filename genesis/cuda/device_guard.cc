// DeviceGuard of a build with CUDA (the CPU-only build uses runtime_nocuda.cc).

#include "genesis/cuda/device_guard.h"

#include <cuda_runtime_api.h>

#include "absl/status/statusor.h"
#include "genesis/core/status.h"
#include "genesis/cuda/device_query.h"
#include "genesis/cuda/internal/check.h"

namespace genesis::cuda {

absl::StatusOr<int> CurrentDevice() {
  int device = 0;
  GENESIS_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  return device;
}

absl::StatusOr<DeviceGuard> DeviceGuard::Create(int device) {
  GENESIS_RETURN_IF_ERROR(CheckDeviceIndex(device));
  int previous = 0;
  GENESIS_CUDA_RETURN_IF_ERROR(cudaGetDevice(&previous));
  if (previous != device) {
    GENESIS_CUDA_RETURN_IF_ERROR_ON(device, cudaSetDevice(device));
  }
  return DeviceGuard(device, previous);
}

void DeviceGuard::Restore() noexcept {
  if (!active_) return;
  active_ = false;
  if (previous_ == device_) return;
  IgnoreCudaError(cudaSetDevice(previous_));
}

}  // namespace genesis::cuda
