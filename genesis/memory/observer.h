// Hooks for watching a CachingAllocator: profilers, memory timelines, leak trackers.
//
// An observer sees every allocation, free, segment change and OOM as it happens, with
// enough context (sizes, address, stream, whether the cache served it, the thread and a
// steady-clock time) to rebuild a memory timeline like PyTorch's memory snapshots. With
// no observer attached the pool pays one relaxed atomic load per call, so production
// code leaves the hooks compiled in. With one attached, the thread-cache fast path stays
// lock-free: its events (cache hits and frees into the thread's cache) go to
// OnFastEvent without a timestamp, so an observer can keep its own cheaper clock.
#ifndef GENESIS_MEMORY_OBSERVER_H_
#define GENESIS_MEMORY_OBSERVER_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "genesis/memory/stream_events.h"

namespace genesis::memory {

enum class AllocatorEventType {
  kAllocate,
  kFree,
  kSegmentAlloc,
  kSegmentFree,
  kOom,
  // Expandable segments: physical memory mapped into (unmapped from) the address range.
  kSegmentMap,
  kSegmentUnmap,
};

// "allocate", "free", "segment_alloc", "segment_free", "oom", "segment_map",
// "segment_unmap".
std::string_view AllocatorEventTypeName(AllocatorEventType type);

struct AllocatorEvent {
  AllocatorEventType type = AllocatorEventType::kAllocate;
  // Block or segment size in bytes (for kOom: the rounded size that could not be had).
  size_t size = 0;
  // Bytes the caller asked for (kAllocate, kFree, kOom); 0 otherwise.
  size_t requested = 0;
  // Block, segment or mapped range start; nullptr for kOom.
  const void* address = nullptr;
  StreamId stream = kNoStream;
  // kAllocate only: served from cached memory (true) or from a new segment (false).
  bool cache_hit = false;
  // Hash of the calling thread's std::thread::id.
  uint64_t thread_id = 0;
  // std::chrono::steady_clock time in nanoseconds, taken when the call's work was done;
  // 0 in events passed to OnFastEvent.
  int64_t timestamp_ns = 0;
  // kAllocate and kFree outside the fast path: nanoseconds the call spent in the pool
  // (0 on the fast path, whose calls take a few nanoseconds).
  int64_t duration_ns = 0;
  // The block belongs to the small pool (requests below small_size_limit).
  bool small_pool = false;
  // Reported from the thread-cache fast path (through OnFastEvent).
  bool from_thread_cache = false;
};

class AllocatorObserver {
 public:
  virtual ~AllocatorObserver() = default;
  // Called on the thread that made the allocator call, after the allocator released its
  // locks, so an observer may call back into the allocator (e.g. Stats()). Must be
  // thread-safe: several threads may report at once. Events of different threads are not
  // ordered with each other; order by timestamp.
  virtual void OnEvent(const AllocatorEvent& event) = 0;

  // Events of the thread-cache fast path: kAllocate hits served from the calling
  // thread's cache and kFree of blocks going back into it. Called on the calling thread
  // without any pool lock and without taking one, with timestamp_ns == 0. Must not
  // block, and must not call RemoveObserver (which waits for calls in here to finish).
  // The default stamps the event with the steady clock and passes it to OnEvent.
  virtual void OnFastEvent(const AllocatorEvent& event);
};

}  // namespace genesis::memory

#endif  // GENESIS_MEMORY_OBSERVER_H_
