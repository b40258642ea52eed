#include "genesis/memory/fake_stream_events.h"

#include <mutex>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace genesis::memory {

absl::StatusOr<EventId> FakeStreamEvents::Record(StreamId stream) {
  std::lock_guard<std::mutex> lock(mu_);
  ++records_;
  const EventId id = next_id_++;
  markers_[id] = Marker{stream, false};
  return id;
}

absl::StatusOr<bool> FakeStreamEvents::Query(EventId event) {
  std::lock_guard<std::mutex> lock(mu_);
  ++queries_;
  auto it = markers_.find(event);
  if (it == markers_.end()) {
    violations_.push_back(absl::StrCat("Query(", event, "): unknown marker"));
    return absl::NotFoundError(absl::StrCat("unknown marker ", event));
  }
  return it->second.completed;
}

absl::Status FakeStreamEvents::Synchronize(EventId event) {
  std::lock_guard<std::mutex> lock(mu_);
  ++synchronizes_;
  auto it = markers_.find(event);
  if (it == markers_.end()) {
    violations_.push_back(absl::StrCat("Synchronize(", event, "): unknown marker"));
    return absl::NotFoundError(absl::StrCat("unknown marker ", event));
  }
  it->second.completed = true;
  return absl::OkStatus();
}

void FakeStreamEvents::Release(EventId event) {
  std::lock_guard<std::mutex> lock(mu_);
  ++releases_;
  if (markers_.erase(event) == 0) {
    violations_.push_back(absl::StrCat("Release(", event, "): unknown marker"));
  }
}

void FakeStreamEvents::Complete(StreamId stream) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, marker] : markers_) {
    if (marker.stream == stream) marker.completed = true;
  }
}

void FakeStreamEvents::CompleteAll() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, marker] : markers_) marker.completed = true;
}

int64_t FakeStreamEvents::records() const {
  std::lock_guard<std::mutex> lock(mu_);
  return records_;
}
int64_t FakeStreamEvents::queries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queries_;
}
int64_t FakeStreamEvents::synchronizes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return synchronizes_;
}
int64_t FakeStreamEvents::releases() const {
  std::lock_guard<std::mutex> lock(mu_);
  return releases_;
}
int64_t FakeStreamEvents::outstanding() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(markers_.size());
}
std::vector<std::string> FakeStreamEvents::violations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return violations_;
}

}  // namespace genesis::memory
