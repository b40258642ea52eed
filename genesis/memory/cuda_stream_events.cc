// CudaStreamEvents (CUDA builds only).

#include "genesis/memory/cuda_stream_events.h"

#include <cuda_runtime_api.h>

#include <cassert>
#include <memory>
#include <mutex>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "genesis/core/status.h"
#include "genesis/cuda/device_guard.h"
#include "genesis/cuda/device_query.h"
#include "genesis/cuda/internal/check.h"

namespace genesis::memory {

absl::StatusOr<std::unique_ptr<CudaStreamEvents>> CudaStreamEvents::Create(int device) {
  GENESIS_RETURN_IF_ERROR(cuda::CheckDeviceIndex(device));
  return std::unique_ptr<CudaStreamEvents>(new CudaStreamEvents(device));
}

CudaStreamEvents::~CudaStreamEvents() {
  if (events_.empty()) return;
  cuda::internal::BestEffortDeviceSwitch on_device(device_);
  for (CUevent_st* event : events_) cuda::IgnoreCudaError(cudaEventDestroy(event));
}

absl::StatusOr<EventId> CudaStreamEvents::Record(StreamId stream) {
  // With the device current, stream 0 (and cudaStreamLegacy / cudaStreamPerThread) mean
  // this device's default stream, and new events are created on it.
  GENESIS_ASSIGN_OR_RETURN(cuda::DeviceGuard guard, cuda::DeviceGuard::Create(device_));
  size_t index = 0;
  cudaEvent_t event = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!free_.empty()) {
      index = free_.back();
      free_.pop_back();
      event = events_[index];
      in_use_[index] = true;
    }
  }
  if (event == nullptr) {
    const cudaError_t err = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
    if (err != cudaSuccess) {
      return cuda::CudaStatus(err, "cudaEventCreateWithFlags(cudaEventDisableTiming)",
                              device_);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    index = events_.size();
    events_.push_back(event);
    in_use_.push_back(true);
  }
  const cudaError_t err = cudaEventRecord(event, reinterpret_cast<cudaStream_t>(stream));
  if (err != cudaSuccess) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      in_use_[index] = false;
      free_.push_back(index);
    }
    return cuda::CudaStatus(
        err, absl::StrCat("cudaEventRecord(event, stream=", absl::Hex(stream), ")"),
        device_);
  }
  return static_cast<EventId>(index) + 1;
}

absl::StatusOr<CUevent_st*> CudaStreamEvents::Lookup(EventId id, const char* what) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (id == 0 || id > events_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": event id ", id, " was not handed out by the CudaStreamEvents of cuda:",
                     device_, " (", events_.size(), " events exist)"));
  }
  if (!in_use_[id - 1]) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": event id ", id, " of cuda:", device_, " has been released already"));
  }
  return events_[id - 1];
}

absl::StatusOr<bool> CudaStreamEvents::Query(EventId id) {
  GENESIS_ASSIGN_OR_RETURN(cudaEvent_t event, Lookup(id, "Query"));
  const cudaError_t err = cudaEventQuery(event);
  if (err == cudaSuccess) return true;
  if (err == cudaErrorNotReady) {
    // Not a failure, but the runtime records it as the last error: clear it.
    cuda::IgnoreCudaError(err);
    return false;
  }
  return cuda::CudaStatus(err, "cudaEventQuery", device_);
}

absl::Status CudaStreamEvents::Synchronize(EventId id) {
  GENESIS_ASSIGN_OR_RETURN(cudaEvent_t event, Lookup(id, "Synchronize"));
  return cuda::CudaStatus(cudaEventSynchronize(event), "cudaEventSynchronize", device_);
}

void CudaStreamEvents::Release(EventId id) {
  std::lock_guard<std::mutex> lock(mutex_);
  const bool valid = id != 0 && id <= events_.size() && in_use_[id - 1];
  assert(valid && "CudaStreamEvents::Release of an id not handed out or released twice");
  if (!valid) return;
  in_use_[id - 1] = false;
  free_.push_back(static_cast<size_t>(id - 1));
}

size_t CudaStreamEvents::event_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_.size();
}

size_t CudaStreamEvents::free_event_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return free_.size();
}

}  // namespace genesis::memory
