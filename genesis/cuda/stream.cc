// Stream of a build with CUDA (the CPU-only build uses runtime_nocuda.cc).

#include "genesis/cuda/stream.h"

#include <optional>

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "genesis/core/status.h"
#include "genesis/cuda/device_guard.h"
#include "genesis/cuda/event.h"
#include "genesis/cuda/internal/check.h"
#include "genesis/cuda/internal/common.h"

namespace genesis::cuda {

absl::StatusOr<int> Stream::HighestPriority(int device) {
  GENESIS_ASSIGN_OR_RETURN(DeviceGuard guard, DeviceGuard::Create(device));
  int least = 0;
  int greatest = 0;
  GENESIS_CUDA_RETURN_IF_ERROR_ON(device,
                                  cudaDeviceGetStreamPriorityRange(&least, &greatest));
  return greatest;
}

absl::StatusOr<Stream> Stream::Create(int device, bool non_blocking, int priority) {
  GENESIS_ASSIGN_OR_RETURN(DeviceGuard guard, DeviceGuard::Create(device));
  int least = 0;
  int greatest = 0;
  GENESIS_CUDA_RETURN_IF_ERROR_ON(device,
                                  cudaDeviceGetStreamPriorityRange(&least, &greatest));
  // Lower numbers are higher priority: the range is [greatest, least].
  if (priority < greatest || priority > least) {
    return absl::InvalidArgumentError(absl::StrCat(
        "stream priority ", priority, " is outside the range of cuda:", device, ", [",
        greatest, ", ", least, "] (lower numbers are higher priority; 0 is the default)"));
  }
  const unsigned int flags = non_blocking ? cudaStreamNonBlocking : cudaStreamDefault;
  cudaStream_t stream = nullptr;
  const cudaError_t err = cudaStreamCreateWithPriority(&stream, flags, priority);
  if (err != cudaSuccess) {
    return CudaStatus(err,
                      absl::StrCat("cudaStreamCreateWithPriority(flags=", flags,
                                   ", priority=", priority, ")"),
                      device);
  }
  return Stream(stream, device, priority, non_blocking);
}

void Stream::Reset() noexcept {
  if (stream_ == nullptr) return;
  {
    internal::BestEffortDeviceSwitch on_device(device_);
    IgnoreCudaError(cudaStreamDestroy(stream_));
  }
  stream_ = nullptr;
  device_ = -1;
  priority_ = 0;
  non_blocking_ = true;
}

absl::Status Stream::Synchronize() const {
  if (stream_ == nullptr) return internal::EmptyHandleError("Stream", "Synchronize");
  return CudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize", device_);
}

absl::StatusOr<bool> Stream::Query() const {
  if (stream_ == nullptr) return internal::EmptyHandleError("Stream", "Query");
  const cudaError_t err = cudaStreamQuery(stream_);
  if (err == cudaSuccess) return true;
  if (err == cudaErrorNotReady) {
    // Not a failure, but the runtime records it as the last error: clear it.
    IgnoreCudaError(err);
    return false;
  }
  return CudaStatus(err, "cudaStreamQuery", device_);
}

absl::Status Stream::Wait(const Event& event) const {
  if (stream_ == nullptr) return internal::EmptyHandleError("Stream", "Wait");
  if (!event.valid()) {
    return internal::EmptyHandleError("Event", "Stream::Wait");
  }
  return CudaStatus(cudaStreamWaitEvent(stream_, event.native(), 0),
                    absl::StrCat("cudaStreamWaitEvent(event of cuda:", event.device(), ")"),
                    device_);
}

absl::Status WaitEvent(CUstream_st* stream, const Event& event) {
  if (!event.valid()) return internal::EmptyHandleError("Event", "WaitEvent");
  // nullptr names the legacy default stream of the current device, whatever device the
  // event is on: make that the event's device, or the wait lands on another device's
  // stream and orders nothing (a rank on cuda:1 read its buckets before the collective).
  std::optional<DeviceGuard> guard;
  if (stream == nullptr) {
    GENESIS_ASSIGN_OR_RETURN(guard, DeviceGuard::Create(event.device()));
  }
  return CudaStatus(cudaStreamWaitEvent(stream, event.native(), 0),
                    absl::StrCat("cudaStreamWaitEvent(event of cuda:", event.device(), ")"),
                    event.device());
}

absl::Status SynchronizeDevice(int device) {
  GENESIS_ASSIGN_OR_RETURN(DeviceGuard guard, DeviceGuard::Create(device));  // Checks it.
  return CudaStatus(cudaDeviceSynchronize(), "cudaDeviceSynchronize", device);
}

}  // namespace genesis::cuda
