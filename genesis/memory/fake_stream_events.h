// StreamEvents for tests: markers that complete only when the test says so.
//
// Stream-ordered reuse is the subtle part of a GPU pool, and real GPU work completes at
// times a test cannot control. FakeStreamEvents lets a test decide: a marker recorded on
// a stream completes when the test calls Complete(stream) or CompleteAll(), or when the
// pool calls Synchronize on it (which is what a real Synchronize would wait for). It
// counts every call and records misuse (Query or Release of an unknown or released
// marker) as violations tests assert on.
#ifndef GENESIS_MEMORY_FAKE_STREAM_EVENTS_H_
#define GENESIS_MEMORY_FAKE_STREAM_EVENTS_H_

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "genesis/memory/stream_events.h"

namespace genesis::memory {

class FakeStreamEvents : public StreamEvents {
 public:
  // Returns a new, incomplete marker on `stream`.
  absl::StatusOr<EventId> Record(StreamId stream) override;
  // Whether the marker completed; NotFound (and a violation) for an unknown id.
  absl::StatusOr<bool> Query(EventId event) override;
  // Completes the marker, as waiting for the stream would.
  absl::Status Synchronize(EventId event) override;
  void Release(EventId event) override;

  // Completes every marker recorded so far on `stream`.
  void Complete(StreamId stream);
  // Completes every marker recorded so far.
  void CompleteAll();

  int64_t records() const;
  int64_t queries() const;
  int64_t synchronizes() const;
  int64_t releases() const;
  // Markers recorded and not yet released.
  int64_t outstanding() const;
  std::vector<std::string> violations() const;

 private:
  struct Marker {
    StreamId stream;
    bool completed;
  };
  mutable std::mutex mu_;
  EventId next_id_ = 1;
  absl::flat_hash_map<EventId, Marker> markers_;
  int64_t records_ = 0;
  int64_t queries_ = 0;
  int64_t synchronizes_ = 0;
  int64_t releases_ = 0;
  std::vector<std::string> violations_;
};

}  // namespace genesis::memory

#endif  // GENESIS_MEMORY_FAKE_STREAM_EVENTS_H_
