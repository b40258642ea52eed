// Hooks for watching a CachingAllocator: profilers, memory timelines, leak trackers.
//
// An observer sees every allocation, free, segment change and OOM as it happens, with
// enough context (sizes, address, stream, whether the cache served it, the thread and a
// steady-clock time) to rebuild a memory timeline like PyTorch's memory snapshots. With
// no observer attached the pool pays one relaxed atomic load per call, so production
// code leaves the hooks compiled in.
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
};

// "allocate", "free", "segment_alloc", "segment_free", "oom".
std::string_view AllocatorEventTypeName(AllocatorEventType type);

struct AllocatorEvent {
  AllocatorEventType type = AllocatorEventType::kAllocate;
  // Block or segment size in bytes (for kOom: the rounded size that could not be had).
  size_t size = 0;
  // Bytes the caller asked for (kAllocate, kFree, kOom); 0 otherwise.
  size_t requested = 0;
  // Block or segment start; nullptr for kOom.
  const void* address = nullptr;
  StreamId stream = kNoStream;
  // kAllocate only: served from cached memory (true) or from a new segment (false).
  bool cache_hit = false;
  // Hash of the calling thread's std::thread::id.
  uint64_t thread_id = 0;
  // std::chrono::steady_clock time in nanoseconds.
  int64_t timestamp_ns = 0;
};

class AllocatorObserver {
 public:
  virtual ~AllocatorObserver() = default;
  // Called on the thread that made the allocator call, after the allocator released its
  // locks, so an observer may call back into the allocator (e.g. Stats()). Must be
  // thread-safe: several threads may report at once. Events of different threads are not
  // ordered with each other; order by timestamp.
  virtual void OnEvent(const AllocatorEvent& event) = 0;
};

}  // namespace genesis::memory

#endif  // GENESIS_MEMORY_OBSERVER_H_
