// Replays an allocation trace (trace.h) through a CachingAllocator, to measure
// how a pool configuration fragments memory and how often it calls its backend
// (cudaMalloc / cudaFree on a GPU) for a real workload, without running the
// workload.
//
//   GENESIS_ASSIGN_OR_RETURN(auto events,
//   ReadTrace("traces/gpt2_small_train.trace.gz"));
//   GENESIS_ASSIGN_OR_RETURN(ReplayResult r, ReplayOnHost(events,
//   AllocatorOptions()));
//   // r.peak_reserved / r.peak_allocated: the fragmentation overhead of the
//   settings.
//
// ReplayOnHost needs no GPU: a trace recorded on one replays against a
// TestBackend that pretends to be CUDA device memory and reserves address space
// without touching it.
#ifndef GENESIS_REPLAY_REPLAYER_H_
#define GENESIS_REPLAY_REPLAYER_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "genesis/memory/allocator_options.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/memory_stats.h"
#include "genesis/replay/trace.h"

namespace genesis::replay {

struct ReplayOptions {
  // After the timed replay, a second (untimed) pass checks that every alloc got
  // a non-null pointer aligned to 512 bytes and that no two blocks live at the
  // same time overlap (over their requested sizes), using the pointers the
  // replay recorded.
  bool verify = true;
  // Names the trace in error messages ("<name>:<line>: ...").
  std::string name = "trace";
};

// What one step of a trace (see TraceEvent::step) cost.
struct StepResult {
  int step = 0;
  uint64_t num_ops = 0;
  int64_t segment_allocs = 0;
  int64_t segment_frees = 0;
  int64_t maps = 0;
  int64_t unmaps = 0;
  double ns_per_op = 0.0;
};

struct ReplayResult {
  // Pool calls made by the timed replay: allocs plus free_completed events.
  uint64_t num_ops = 0;
  // Peaks of the pool's allocated (block sizes, after rounding) and reserved
  // bytes during the replay (the pool's peaks are reset first; memory the pool
  // held before counts too).
  uint64_t peak_allocated = 0;
  uint64_t peak_reserved = 0;
  // peak_reserved / peak_allocated (0 if nothing was allocated).
  double reserved_over_allocated = 0.0;
  // peak_reserved / trace_peak_live: against what the program asked for, before any
  // rounding (0 if nothing was live).
  double reserved_over_live = 0.0;
  // Backend calls during the replay: segment_allocs + segment_frees + maps + unmaps.
  // With expandable segments, segment allocs and frees are address-range
  // reservations and releases, and maps and unmaps are virtual-memory calls.
  int64_t backend_calls = 0;
  int64_t segment_allocs = 0;
  int64_t segment_frees = 0;
  int64_t maps = 0;
  int64_t unmaps = 0;
  // Wall time of the replay loop (pool calls plus an array access each) per op.
  double ns_per_op = 0.0;
  // SummarizeTrace(events).peak_live_bytes: what the program itself had live at
  // most, a lower bound for peak_allocated.
  uint64_t trace_peak_live = 0;
  // Blocks the trace left live at its end; Replay frees them after the timed
  // loop.
  int64_t live_at_end = 0;
  // The pool's statistics after the replay and those final frees.
  memory::MemoryStats final_stats;
  // Per step, in trace order (a step's events need not be contiguous: each run of
  // events of one step is an entry), when the trace has step markers; else empty.
  // Their ops add up to num_ops. The pool's counters are read between steps with
  // the clock stopped.
  std::vector<StepResult> steps;
};

// Replays `events` through `pool` on the calling thread: Allocate(size, stream)
// at each alloc (the trace's stream value used as the StreamId; RecordStream is
// never called, so the pool needs no StreamEvents) and Free at each
// free_completed; free_requested does nothing. Blocks still live at the end are
// freed afterwards (untimed), and the pool's allocated bytes must then be back
// at their value before the replay (0 for a fresh pool), else Internal "leak".
// The pool is not emptied: its cache stays. Errors, each naming options.name
// and the trace line:
//   * InvalidArgument for inconsistent events (alloc of a live trace address,
//   free of
//     one that is not live), found before the pool is touched;
//   * the pool's own error (code kept, its message appended) when an Allocate
//   or Free
//     fails, e.g. ResourceExhausted;
//   * Internal when verification finds a null, misaligned or overlapping block.
// After an error every block the replay allocated has been freed again.
absl::StatusOr<ReplayResult> Replay(const std::vector<TraceEvent> &events,
                                    memory::CachingAllocator &pool,
                                    const ReplayOptions &options = ReplayOptions());

// Address space a ReplayOnHost pool may reserve: 1 TiB, more than any GPU has.
// It is reserved without swap and never touched, so it costs no memory.
inline constexpr size_t kDefaultReplayCapacity = size_t{1} << 40;

// Builds a fresh CachingAllocator with `pool_options` over a TestBackend that
// pretends to be cuda:0 device memory of `capacity` bytes (which
// memory_fraction and garbage_collection_threshold refer to), replays `events`
// through it, and destroys it. Errors as Replay, plus InvalidArgument for bad
// `pool_options`.
absl::StatusOr<ReplayResult> ReplayOnHost(const std::vector<TraceEvent> &events,
                                          const memory::AllocatorOptions &pool_options,
                                          const ReplayOptions &options = ReplayOptions(),
                                          size_t capacity = kDefaultReplayCapacity);

// The set of live address ranges, for checking that a pool never hands out
// memory that overlaps a live block. Replay's verification uses it; exposed for
// tests.
class OverlapChecker {
 public:
  // Adds [begin, begin + max(size, 1)), remembering `line` (the trace line of
  // its alloc). Internal, naming both ranges and the other one's line, if it
  // overlaps a live range (and then adds nothing).
  absl::Status Insert(uintptr_t begin, uint64_t size, int line);
  // Removes the range starting at `begin`. Internal, naming `begin`, if there
  // is none.
  absl::Status Erase(uintptr_t begin);
  size_t size() const { return ranges_.size(); }

 private:
  struct Range {
    uintptr_t end;
    int line;
  };
  std::map<uintptr_t, Range> ranges_;  // By begin.
};

}  // namespace genesis::replay

#endif  // GENESIS_REPLAY_REPLAYER_H_
