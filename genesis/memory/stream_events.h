// How a pool learns that GPU work on a stream has finished, without knowing CUDA.
//
// A block freed on stream S may be reused on S at once (work on S is ordered); before it
// may be reused on another stream, or returned to the backend, the work on every stream
// that used it (record_stream) must be finished. The pool records one marker per such
// stream when the block is freed, and asks whether the markers have completed. In a build
// with CUDA, CudaStreamEvents implements this with pooled CUDA events; tests use
// FakeStreamEvents, whose markers complete when the test says so.
#ifndef GENESIS_MEMORY_STREAM_EVENTS_H_
#define GENESIS_MEMORY_STREAM_EVENTS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace genesis::memory {

// A stream, opaque to the pool: a cudaStream_t cast to an integer in a build with CUDA
// (0 is the legacy default stream), any number in tests. Host pools use kNoStream.
using StreamId = uintptr_t;
inline constexpr StreamId kNoStream = 0;

// A marker recorded on a stream; meaningful only to the StreamEvents that made it.
using EventId = uint64_t;

class StreamEvents {
 public:
  virtual ~StreamEvents() = default;

  // Records a marker on `stream` that completes once all work submitted to `stream` so
  // far has finished.
  virtual absl::StatusOr<EventId> Record(StreamId stream) = 0;

  // True once the marker has completed. After that, and after Release, the id is void.
  virtual absl::StatusOr<bool> Query(EventId event) = 0;

  // Blocks until the marker has completed.
  virtual absl::Status Synchronize(EventId event) = 0;

  // Gives the marker back (to a pool of events); the pool calls it exactly once per id.
  virtual void Release(EventId event) = 0;
};

}  // namespace genesis::memory

#endif  // GENESIS_MEMORY_STREAM_EVENTS_H_
