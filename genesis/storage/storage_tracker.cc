#include "genesis/storage/storage_tracker.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace genesis::storage {
namespace {

struct Registry {
  std::atomic<int> trackers{0};
  std::mutex mu;
  uint64_t next_id = 1;                       // Guarded by mu.
  std::map<uint64_t, TrackedStorage> live;    // Guarded by mu; ordered by id.
};

Registry& GetRegistry() {
  static Registry* registry = new Registry();  // Never destroyed: used at exit.
  return *registry;
}

std::string Where(const std::source_location& where) {
  return absl::StrCat(where.file_name(), ":", where.line());
}

std::string Line(const TrackedStorage& s) {
  return absl::StrFormat("#%d %s%s %d bytes %s made at %s", s.id, s.device.ToString(),
                         s.pinned ? " (pinned)" : "", s.nbytes, s.description,
                         Where(s.where));
}

}  // namespace

StorageTracker::StorageTracker() {
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  registry.trackers.fetch_add(1, std::memory_order_relaxed);
  first_id_ = registry.next_id;
}

StorageTracker::~StorageTracker() {
  GetRegistry().trackers.fetch_sub(1, std::memory_order_relaxed);
}

std::vector<TrackedStorage> StorageTracker::Live() const {
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  std::vector<TrackedStorage> out;
  for (auto it = registry.live.lower_bound(first_id_); it != registry.live.end(); ++it) {
    out.push_back(it->second);
  }
  return out;
}

size_t StorageTracker::live_bytes() const {
  size_t total = 0;
  for (const TrackedStorage& s : Live()) total += s.nbytes;
  return total;
}

absl::Status StorageTracker::CheckNoLeaks() const {
  const std::vector<TrackedStorage> live = Live();
  if (live.empty()) return absl::OkStatus();
  size_t bytes = 0;
  for (const TrackedStorage& s : live) bytes += s.nbytes;
  std::string message =
      absl::StrFormat("%d storages (%d bytes) still alive:", live.size(), bytes);
  constexpr size_t kMaxListed = 20;
  for (size_t i = 0; i < std::min(live.size(), kMaxListed); ++i) {
    absl::StrAppend(&message, "\n  ", Line(live[i]));
  }
  if (live.size() > kMaxListed) {
    absl::StrAppend(&message, "\n  ... and ", live.size() - kMaxListed, " more");
  }
  return absl::FailedPreconditionError(message);
}

std::string StorageTracker::Report() const {
  const std::vector<TrackedStorage> live = Live();
  std::string out;
  size_t bytes = 0;
  for (const TrackedStorage& s : live) {
    absl::StrAppend(&out, Line(s), "\n");
    bytes += s.nbytes;
  }
  absl::StrAppendFormat(&out, "%d live storages, %d bytes\n", live.size(), bytes);
  return out;
}

namespace internal {

uint64_t TrackStorage(TrackedStorage info) {
  Registry& registry = GetRegistry();
  if (registry.trackers.load(std::memory_order_relaxed) == 0) return 0;
  std::lock_guard<std::mutex> lock(registry.mu);
  info.id = registry.next_id++;
  const uint64_t id = info.id;
  registry.live.emplace(id, std::move(info));
  return id;
}

void UntrackStorage(uint64_t id) {
  if (id == 0) return;
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  registry.live.erase(id);
}

bool TrackingActive() {
  return GetRegistry().trackers.load(std::memory_order_relaxed) > 0;
}

}  // namespace internal
}  // namespace genesis::storage
