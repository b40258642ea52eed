// StorageTracker: which storages are alive, how many bytes they hold and where each was
// made, to find leaks (F10).
//
//   {
//     StorageTracker tracker;
//     RunOneTrainingStep();
//     GENESIS_RETURN_IF_ERROR(tracker.CheckNoLeaks());  // lists survivors, with file:line
//   }
//
// While at least one tracker exists, every storage memory made (by any thread) is
// registered, with its size, device, description and the source location of the call
// that made it (storage.h's factories capture it). A tracker reports the ones made
// during its own life that are still alive; trackers may nest and overlap. With no
// tracker, making a storage costs one atomic load here. Thread-safe.
//
// This target knows nothing of Storage: storages register through internal::Track*.
#ifndef GENESIS_STORAGE_STORAGE_TRACKER_H_
#define GENESIS_STORAGE_STORAGE_TRACKER_H_

#include <cstddef>
#include <cstdint>
#include <source_location>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "genesis/core/device.h"

namespace genesis::storage {

// One live storage memory.
struct TrackedStorage {
  uint64_t id = 0;        // Increasing in order of creation.
  size_t nbytes = 0;      // Bytes of the memory.
  Device device;
  bool pinned = false;
  std::string description;  // e.g. "float32[2, 3]" as first made.
  std::source_location where;
};

class StorageTracker {
 public:
  // Starts registering storages made from now on.
  StorageTracker();
  // Stops registering (for this tracker; others go on).
  ~StorageTracker();
  StorageTracker(const StorageTracker&) = delete;
  StorageTracker& operator=(const StorageTracker&) = delete;

  // The storages made during this tracker's life and still alive, oldest first.
  std::vector<TrackedStorage> Live() const;
  size_t live_count() const { return Live().size(); }
  // Their total bytes.
  size_t live_bytes() const;
  // OK if none is alive; otherwise FailedPrecondition("N storages (B bytes) still
  // alive: ...") listing the first 20 with their device, size, description and
  // file:line.
  absl::Status CheckNoLeaks() const;
  // A readable table of Live(): one line each, then the totals.
  std::string Report() const;

 private:
  uint64_t first_id_;
};

namespace internal {
// Registers a new storage memory if a tracker exists and returns its id, else 0.
// `info.id` is ignored.
uint64_t TrackStorage(TrackedStorage info);
// Forgets a registered memory (id from TrackStorage; 0 is ignored).
void UntrackStorage(uint64_t id);
// True while a tracker exists (one relaxed atomic load).
bool TrackingActive();
}  // namespace internal

}  // namespace genesis::storage

#endif  // GENESIS_STORAGE_STORAGE_TRACKER_H_
