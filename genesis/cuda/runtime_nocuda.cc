// genesis/cuda for the CPU-only build (no CUDA toolkit): every function of the public
// headers, with zero devices. Queries about a CUDA device and the creation of streams,
// events and device guards fail with FailedPrecondition("genesis was built without CUDA
// support (CPU-only build); ..."). What does not depend on CUDA (formatting, parsing,
// moves) is shared with the CUDA build in runtime_common.cc.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "genesis/cuda/device_guard.h"
#include "genesis/cuda/device_query.h"
#include "genesis/cuda/event.h"
#include "genesis/cuda/graph.h"
#include "genesis/cuda/internal/common.h"
#include "genesis/cuda/sanitizer_marks.h"
#include "genesis/cuda/stream.h"

namespace genesis::cuda {

using internal::NoCudaSupportError;

// device_query.h

bool BuiltWithCuda() { return false; }

int DeviceCount() { return 0; }

std::string NoDeviceReason() { return std::string(internal::kBuiltWithoutCuda); }

absl::Status CheckDeviceIndex(int device) {
  return NoCudaSupportError(absl::StrCat("use device 'cuda:", device, "'"));
}

absl::StatusOr<DeviceProperties> GetDeviceProperties(int device) {
  return NoCudaSupportError(absl::StrCat("query the properties of cuda:", device));
}

absl::StatusOr<MemoryInfo> GetMemoryInfo(int device) {
  return NoCudaSupportError(absl::StrCat("query the memory of cuda:", device));
}

absl::StatusOr<std::vector<std::vector<bool>>> PeerAccessMatrix() {
  return NoCudaSupportError("query CUDA peer access");
}

Versions GetVersions() {
  Versions versions;
  versions.nccl_error = std::string(internal::kBuiltWithoutCuda);
  return versions;
}

// device_guard.h

absl::StatusOr<int> CurrentDevice() {
  return NoCudaSupportError("query the current CUDA device");
}

absl::StatusOr<DeviceGuard> DeviceGuard::Create(int device) {
  return NoCudaSupportError(absl::StrCat("make cuda:", device, " current"));
}

void DeviceGuard::Restore() noexcept { active_ = false; }

// stream.h (no Stream can be created, so every Stream is empty.)

absl::StatusOr<int> Stream::HighestPriority(int device) {
  return NoCudaSupportError(absl::StrCat("query the stream priorities of cuda:", device));
}

absl::StatusOr<Stream> Stream::Create(int device, bool /*non_blocking*/,
                                      int /*priority*/) {
  return NoCudaSupportError(absl::StrCat("create a CUDA stream on cuda:", device));
}

void Stream::Reset() noexcept { stream_ = nullptr; }

absl::Status Stream::Synchronize() const {
  return NoCudaSupportError("synchronize a CUDA stream");
}

absl::StatusOr<bool> Stream::Query() const {
  return NoCudaSupportError("query a CUDA stream");
}

absl::Status Stream::Wait(const Event& /*event*/) const {
  return NoCudaSupportError("make a CUDA stream wait for an event");
}

absl::Status WaitEvent(CUstream_st* /*stream*/, const Event& /*event*/) {
  return NoCudaSupportError("make a CUDA stream wait for an event");
}

absl::Status SynchronizeDevice(int /*device*/) {
  return NoCudaSupportError("synchronize a CUDA device");
}

// graph.h (no Graph can be made, so every Graph is empty.)

absl::Status BeginCapture(CUstream_st* /*stream*/) {
  return NoCudaSupportError("capture a CUDA graph");
}

bool IsCapturing(CUstream_st* /*stream*/) { return false; }

absl::StatusOr<Graph> Graph::EndCapture(CUstream_st* /*stream*/) {
  return NoCudaSupportError("capture a CUDA graph");
}

Graph::~Graph() = default;

Graph::Graph(Graph&& other) noexcept : exec_(other.exec_) { other.exec_ = nullptr; }

Graph& Graph::operator=(Graph&& other) noexcept {
  exec_ = other.exec_;
  other.exec_ = nullptr;
  return *this;
}

absl::Status Graph::Launch(CUstream_st* /*stream*/) const {
  return NoCudaSupportError("launch a CUDA graph");
}

// event.h (no Event can be created, so every Event is empty.)

absl::StatusOr<Event> Event::Create(int device, bool /*timing*/) {
  return NoCudaSupportError(absl::StrCat("create a CUDA event on cuda:", device));
}

void Event::Reset() noexcept { event_ = nullptr; }

absl::Status Event::Record(const Stream& /*stream*/) {
  return NoCudaSupportError("record a CUDA event");
}

absl::Status Event::Record(CUstream_st* /*stream*/) {
  return NoCudaSupportError("record a CUDA event");
}

absl::Status Event::Synchronize() const {
  return NoCudaSupportError("synchronize a CUDA event");
}

absl::StatusOr<bool> Event::Query() const {
  return NoCudaSupportError("query a CUDA event");
}

absl::StatusOr<float> Event::ElapsedMs(const Event& /*start*/, const Event& /*end*/) {
  return NoCudaSupportError("time CUDA events");
}

void MarkInitialized(const void* /*ptr*/, size_t /*bytes*/, CUstream_st* /*stream*/) {}

}  // namespace genesis::cuda
