// DeviceGuard of a build with CUDA (the CPU-only build uses runtime_nocuda.cc).

#include "genesis/cuda/device_guard.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "absl/status/statusor.h"
#include "genesis/core/status.h"
#include "genesis/cuda/device_query.h"
#include "genesis/cuda/internal/check.h"
#include "genesis/cuda/internal/driver.h"

namespace genesis::cuda {
namespace {

// Whether the calling thread's current context is on `device`, asked of the driver
// (cuCtxGetDevice) rather than through cudaGetDevice: a guard on the current device took
// 45-60 ns that way and takes 20-24 ns this way on a four-H200 machine's host
// (issue_path_benchmark), and every collective takes one. False when unsure: no
// context, no such entry point, or a device the driver does not know; the caller then
// takes the runtime's path.
bool ContextIsOn(int device) {
  static const auto ctx_get_device =
      DriverFunctionOrNull<decltype(&::cuCtxGetDevice)>("cuCtxGetDevice");
  static const auto device_get = DriverFunctionOrNull<decltype(&::cuDeviceGet)>("cuDeviceGet");
  if (ctx_get_device == nullptr || device_get == nullptr) return false;
  // The driver's handle of the last ordinal this thread asked about.
  thread_local int ordinal = -1;
  thread_local CUdevice handle = 0;
  if (ordinal != device) {
    if (device_get(&handle, device) != CUDA_SUCCESS) return false;
    ordinal = device;
  }
  CUdevice current = 0;
  return ctx_get_device(&current) == CUDA_SUCCESS && current == handle;
}

}  // namespace

absl::StatusOr<int> CurrentDevice() {
  int device = 0;
  GENESIS_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  return device;
}

absl::StatusOr<DeviceGuard> DeviceGuard::Create(int device) {
  // The usual case: the device is current already (a context on it exists, so it is a
  // valid index).
  if (device >= 0 && ContextIsOn(device)) return DeviceGuard(device, device);
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
