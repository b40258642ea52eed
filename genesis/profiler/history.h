// History: one recorded memory history, as the recorder hands it to reports and exports.
//
// Every report (summary.h, leak_report.h) and export (chrome_trace.h, torch_snapshot.h,
// replay_export.h, picture.h) is a function of a History alone, so they can be tested
// with histories built by hand and never touch the pools.
#ifndef GENESIS_PROFILER_HISTORY_H_
#define GENESIS_PROFILER_HISTORY_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/memory_stats.h"

namespace genesis::profiler {

enum class EventKind : uint8_t {
  kAlloc,
  kFree,
  kSegmentAlloc,
  kSegmentFree,
  kSegmentMap,
  kSegmentUnmap,
  kOom,
  kMarker,
};

// "alloc", "free", "segment_alloc", "segment_free", "segment_map", "segment_unmap",
// "oom", "marker".
std::string_view EventKindName(EventKind kind);

struct Event {
  EventKind kind = EventKind::kAlloc;
  // steady_clock nanoseconds.
  int64_t time_ns = 0;
  // Index into History::sources; -1 for markers.
  int source = -1;
  // Hash of the recording thread's id, and the event's place in that thread's history.
  uint64_t thread = 0;
  uint64_t sequence = 0;
  uint64_t address = 0;
  // Block, segment or mapped size (rounded); for kOom the rounded request.
  uint64_t size = 0;
  // Bytes asked for (kAlloc, kFree, kOom).
  uint64_t requested = 0;
  uint64_t stream = 0;
  // kAlloc, kFree: time in the pool (0 on the thread-cache fast path).
  int64_t duration_ns = 0;
  bool cache_hit = false;
  bool from_thread_cache = false;
  bool small_pool = false;
  // kMarker: index into History::markers. kOom: index into History::oom_states.
  int aux = -1;
  // Index into History::stacks; -1 without a stack.
  int stack = -1;
};

// A pool the history observed.
struct SourceInfo {
  // "cpu", "cuda:0", ...
  std::string device;
  // The pool's name ("device", "pinned", "host", or what the caller chose).
  std::string name;
  // The pool's allocated and reserved bytes when recording began (events only say
  // what changed).
  int64_t allocated_at_start = 0;
  int64_t reserved_at_start = 0;
  // The pool's segments and statistics when the history was collected.
  std::vector<memory::CachingAllocator::SegmentSnapshot> segments;
  memory::MemoryStats stats;
};

struct History {
  int64_t start_ns = 0;
  // When the history was collected (or recording stopped, if it had).
  int64_t end_ns = 0;
  std::vector<SourceInfo> sources;
  // Ordered by time, then thread and sequence (a thread's events keep their order).
  std::vector<Event> events;
  std::vector<std::string> markers;
  // Distinct call stacks (return addresses, innermost first).
  std::vector<std::vector<uintptr_t>> stacks;
  // The pool's statistics right after each out-of-memory event.
  std::vector<memory::MemoryStats> oom_states;
  // Events overwritten in full rings (the oldest of their thread), and threads recorded.
  uint64_t dropped_events = 0;
  int num_threads = 0;
  // The fast path's events carry times to within this many nanoseconds (0: exact).
  int64_t time_resolution_ns = 0;
};

// "cuda:0/device" style label of a source.
std::string SourceLabel(const SourceInfo& source);

}  // namespace genesis::profiler

#endif  // GENESIS_PROFILER_HISTORY_H_
