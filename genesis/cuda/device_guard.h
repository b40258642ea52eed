// DeviceGuard: makes a CUDA device current for the calling thread for the lifetime of a
// scope and restores the previous one afterwards.
//
// The CUDA runtime keeps one "current device" per host thread; allocations, stream and
// event creation and kernel launches apply to it. Code that works on a particular
// device takes a guard instead of calling cudaSetDevice, so that its caller's current
// device is left as it was:
//
//   GENESIS_ASSIGN_OR_RETURN(DeviceGuard guard, DeviceGuard::Create(device));
//   ...  // `device` is current here.
//   // The caller's device is current again after the scope.
//
// A guard belongs to the thread that created it: destroy it on that thread. Guards
// nest (inner ones are destroyed first). In the CPU-only build Create always fails.

#ifndef GENESIS_CUDA_DEVICE_GUARD_H_
#define GENESIS_CUDA_DEVICE_GUARD_H_

#include "absl/status/statusor.h"

namespace genesis::cuda {

// The CUDA ordinal current for the calling thread (cudaGetDevice; 0 if the thread never
// chose one). The CUDA error if the runtime cannot answer (e.g. no driver);
// FailedPrecondition in the CPU-only build.
absl::StatusOr<int> CurrentDevice();

class DeviceGuard {
 public:
  // Makes CUDA device `device` current for the calling thread (if it is not already)
  // and remembers the previously current one. OutOfRange if the device does not exist
  // (naming it); the CUDA error if the switch fails; FailedPrecondition in the CPU-only
  // build.
  static absl::StatusOr<DeviceGuard> Create(int device);

  // Makes the previously current device current again (unless moved from). Never
  // fails: an error while restoring is ignored.
  ~DeviceGuard();

  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  // Transfers the duty to restore; `other` then restores nothing.
  DeviceGuard(DeviceGuard&& other) noexcept;
  // Restores for the guard being overwritten first, then takes over `other`'s duty.
  DeviceGuard& operator=(DeviceGuard&& other) noexcept;

  // The device made current by Create.
  int device() const { return device_; }
  // The device that was current before Create (restored on destruction).
  int previous_device() const { return previous_; }

 private:
  DeviceGuard(int device, int previous)
      : device_(device), previous_(previous), active_(true) {}
  // Restores previous_ if this guard is active and deactivates it.
  void Restore() noexcept;

  int device_ = -1;
  int previous_ = -1;
  bool active_ = false;
};

}  // namespace genesis::cuda

#endif  // GENESIS_CUDA_DEVICE_GUARD_H_
