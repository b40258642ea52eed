// Recorder: the always-on memory history of one or more pools.
//
// A Recorder attaches itself to pools as an AllocatorObserver and writes every event
// (allocations, frees, segments, maps, OOMs) and the program's markers into bounded
// per-thread rings (event_ring.h): no lock and no allocation on the pool's fast path.
// When a ring is full its oldest events are dropped and counted. Collect() turns the
// rings into a History (history.h), which the reports and exports read.
//
//   GENESIS_ASSIGN_OR_RETURN(auto recorder, Recorder::Create(RecorderOptions()));
//   GENESIS_RETURN_IF_ERROR(recorder->Attach(pool, "cpu", "host"));
//   recorder->Mark("step 1");
//   ...
//   recorder->Stop();
//   History h = recorder->Collect();
//
// Most programs use the ProfileMemory scope (profile_memory.h) instead.
#ifndef GENESIS_PROFILER_RECORDER_H_
#define GENESIS_PROFILER_RECORDER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/profiler/history.h"

namespace genesis::profiler {

// How events of the pool's thread-cache fast path get their time.
enum class FastPathClock {
  // A process-wide time a background thread advances every tick_ns: a load instead of
  // a clock read (which costs more than the pool's whole fast path).
  kTick,
  // A steady_clock read per event.
  kExact,
};

struct RecorderOptions {
  // Events kept per thread (rounded up to a power of two), 1 to 2^24.
  size_t ring_events = size_t{1} << 16;
  // Record each event's call stack (absl::GetStackTrace; frame pointers give complete
  // stacks: build with -fno-omit-frame-pointer). Symbolized only for reports.
  bool stacks = false;
  // Frames kept per event, 1 to 64.
  int stack_depth = 16;
  FastPathClock fast_path_clock = FastPathClock::kTick;
  // kTick's period: 1 us to 1 s.
  // 1 ms: a thousand wakeups a second cost the program next to nothing.
  int64_t tick_ns = 1'000'000;
};

// OK, or InvalidArgument naming the bad field and value; FailedPrecondition if stacks
// are asked for and this platform's unwinder returns none.
absl::Status ValidateRecorderOptions(const RecorderOptions& options);

class Recorder {
 public:
  // Validates `options` (ValidateRecorderOptions) and starts recording (the tick
  // thread, for kTick); nothing is recorded before Attach.
  static absl::StatusOr<std::unique_ptr<Recorder>> Create(const RecorderOptions& options);
  // Stops (Stop) if still recording.
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // Observes `pool` from now on, recording its allocated and reserved bytes now as the
  // starting point. `pool` must outlive the recording (Stop or destruction).
  // InvalidArgument for a null pool or one attached already; FailedPrecondition after
  // Stop.
  absl::Status Attach(memory::CachingAllocator* pool, std::string device,
                      std::string pool_name);

  // Records a marker (a training step, a phase) at the current time on this thread.
  void Mark(std::string_view name);

  // Detaches from every pool and stops the tick thread; events after this are not
  // recorded. FailedPrecondition if already stopped.
  absl::Status Stop();
  bool stopped() const;

  // The history so far (or up to Stop), events in time order. The pools' segments and
  // statistics are read now. Safe while other threads allocate.
  History Collect() const;

  const RecorderOptions& options() const;

  class Core;

 private:
  explicit Recorder(std::shared_ptr<Core> core);
  std::shared_ptr<Core> core_;
};

}  // namespace genesis::profiler

#endif  // GENESIS_PROFILER_RECORDER_H_
