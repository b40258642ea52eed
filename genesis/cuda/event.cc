// Event of a build with CUDA (the CPU-only build uses runtime_nocuda.cc).

#include "genesis/cuda/event.h"

#include <cuda_runtime_api.h>

#include <initializer_list>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "genesis/core/status.h"
#include "genesis/cuda/device_guard.h"
#include "genesis/cuda/internal/check.h"
#include "genesis/cuda/internal/common.h"
#include "genesis/cuda/stream.h"

namespace genesis::cuda {
namespace {

absl::Status WrongDeviceError(int event_device, int stream_device) {
  return absl::InvalidArgumentError(absl::StrCat(
      "cannot record an event of cuda:", event_device, " on a stream of cuda:",
      stream_device, ": an event must be recorded on a stream of its own device"));
}

}  // namespace

absl::StatusOr<Event> Event::Create(int device, bool timing) {
  GENESIS_ASSIGN_OR_RETURN(DeviceGuard guard, DeviceGuard::Create(device));
  const unsigned int flags = timing ? cudaEventDefault : cudaEventDisableTiming;
  cudaEvent_t event = nullptr;
  const cudaError_t err = cudaEventCreateWithFlags(&event, flags);
  if (err != cudaSuccess) {
    return CudaStatus(err, absl::StrCat("cudaEventCreateWithFlags(flags=", flags, ")"),
                      device);
  }
  return Event(event, device, timing);
}

void Event::Reset() noexcept {
  if (event_ == nullptr) return;
  {
    internal::BestEffortDeviceSwitch on_device(device_);
    IgnoreCudaError(cudaEventDestroy(event_));
  }
  event_ = nullptr;
  device_ = -1;
  timing_ = false;
  recorded_ = false;
}

absl::Status Event::Record(const Stream& stream) {
  if (event_ == nullptr) return internal::EmptyHandleError("Event", "Record");
  if (!stream.valid()) return internal::EmptyHandleError("Stream", "Event::Record");
  if (stream.device() != device_) return WrongDeviceError(device_, stream.device());
  return Record(stream.native());
}

absl::Status Event::Record(CUstream_st* stream) {
  if (event_ == nullptr) return internal::EmptyHandleError("Event", "Record");
  // With this event's device current, the default-stream handles (nullptr,
  // cudaStreamLegacy, cudaStreamPerThread) mean that device's default stream.
  GENESIS_ASSIGN_OR_RETURN(DeviceGuard guard, DeviceGuard::Create(device_));
  if (stream != nullptr && stream != cudaStreamLegacy && stream != cudaStreamPerThread) {
    int stream_device = -1;
    GENESIS_CUDA_RETURN_IF_ERROR_ON(device_, cudaStreamGetDevice(stream, &stream_device));
    if (stream_device != device_) return WrongDeviceError(device_, stream_device);
  }
  GENESIS_CUDA_RETURN_IF_ERROR_ON(device_, cudaEventRecord(event_, stream));
  recorded_ = true;
  return absl::OkStatus();
}

absl::Status Event::Synchronize() const {
  if (event_ == nullptr) return internal::EmptyHandleError("Event", "Synchronize");
  return CudaStatus(cudaEventSynchronize(event_), "cudaEventSynchronize", device_);
}

absl::StatusOr<bool> Event::Query() const {
  if (event_ == nullptr) return internal::EmptyHandleError("Event", "Query");
  const cudaError_t err = cudaEventQuery(event_);
  if (err == cudaSuccess) return true;
  if (err == cudaErrorNotReady) {
    // Not a failure, but the runtime records it as the last error: clear it.
    IgnoreCudaError(err);
    return false;
  }
  return CudaStatus(err, "cudaEventQuery", device_);
}

absl::StatusOr<float> Event::ElapsedMs(const Event& start, const Event& end) {
  if (!start.valid()) return internal::EmptyHandleError("Event", "ElapsedMs (start)");
  if (!end.valid()) return internal::EmptyHandleError("Event", "ElapsedMs (end)");
  if (start.device_ != end.device_) {
    return absl::InvalidArgumentError(
        absl::StrCat("ElapsedMs needs two events of one device; start is on cuda:",
                     start.device_, ", end on cuda:", end.device_));
  }
  for (const Event* e : {&start, &end}) {
    const char* which = e == &start ? "start" : "end";
    if (!e->timing_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ElapsedMs needs events created with timing=true; the ", which, " event (cuda:",
          e->device_, ") was created without timing (cudaEventDisableTiming)"));
    }
    if (!e->recorded_) {
      return absl::FailedPreconditionError(
          absl::StrCat("ElapsedMs: the ", which, " event (cuda:", e->device_,
                       ") has never been recorded"));
    }
  }
  float ms = 0.0f;
  GENESIS_CUDA_RETURN_IF_ERROR_ON(start.device_,
                                  cudaEventElapsedTime(&ms, start.event_, end.event_));
  return ms;
}

}  // namespace genesis::cuda
