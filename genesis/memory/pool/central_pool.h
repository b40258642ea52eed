// The central pool: the pool lock and everything it guards (the free sets, the
// segments, classic and expandable, their growth and release, frees waiting on stream
// events), with allocation and free under that lock: best fit, growth, the OOM retry
// and its message, frees with recorded streams, blocks coming back from thread caches.
// The thread caches and the allocation map in front of it take no part in it.
#ifndef GENESIS_MEMORY_POOL_CENTRAL_POOL_H_
#define GENESIS_MEMORY_POOL_CENTRAL_POOL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "genesis/memory/allocator_options.h"
#include "genesis/memory/backend.h"
#include "genesis/memory/pool/block.h"
#include "genesis/memory/pool/classic_segments.h"
#include "genesis/memory/pool/expandable_segments.h"
#include "genesis/memory/pool/free_sets.h"
#include "genesis/memory/pool/oom_message.h"
#include "genesis/memory/pool/pending_frees.h"
#include "genesis/memory/pool/pool_events.h"
#include "genesis/memory/pool/pool_stats.h"
#include "genesis/memory/pool/release_policy.h"
#include "genesis/memory/pool/segment_growth.h"
#include "genesis/memory/pool/segment_map.h"
#include "genesis/memory/segment_snapshot.h"
#include "genesis/memory/stream_events.h"

namespace genesis::memory::pool_internal {

class CentralPool {
 public:
  // Everything passed must outlive this. Large blocks live in expandable segments if
  // options.expandable_segments is not kOff and the backend has virtual memory.
  // `events` may be null; `total_bytes` is the backend's memory (0: unknown).
  CentralPool(Backend& backend, const AllocatorOptions& options, StreamEvents* events,
              size_t total_bytes, PoolStats& stats);
  // Waits for pending stream events and returns every segment to the backend, with
  // whatever blocks are still in them.
  ~CentralPool();
  CentralPool(const CentralPool&) = delete;
  CentralPool& operator=(const CentralPool&) = delete;

  // The pool lock.
  std::mutex& mu() const { return mu_; }
  // True if large blocks live in expandable segments.
  bool expandable() const { return expandable_ != nullptr; }
  // The mapping granularity of expandable segments (0 without them).
  size_t chunk() const { return expandable_ != nullptr ? expandable_->chunk() : 0; }

  // Everything below needs mu().

  // Retires completed events, then hands out a block of `size` (`requested` asked for;
  // `segment_size` is the classic segment it would take) in `pool` for `stream`: the
  // best fit from the free sets (*hit true), else, if `may_grow`, new space after the
  // garbage-collection policy ran (*hit false); nullptr if nothing fits and !may_grow.
  // ResourceExhausted (with `why`) if growth failed for want of memory.
  absl::StatusOr<Block*> AllocateLocked(size_t size, size_t requested, size_t segment_size,
                                        int pool, StreamId stream, bool may_grow, Sink* sink,
                                        OomReason* why, bool* hit);
  // After an out-of-memory: waits for every pending event, tries the free sets again,
  // releases every fully free segment and idle chunk, and asks for new space once more.
  // If that fails for want of memory too: counts the OOM and returns ResourceExhausted
  // with the full OomMessage.
  absl::StatusOr<Block*> AllocateAfterOomLocked(size_t size, size_t requested,
                                                size_t segment_size, int pool,
                                                StreamId stream, Sink* sink, OomReason* why,
                                                bool* hit);
  // Frees the allocated block `b` (out of the allocation map; `requested` bytes were
  // asked for): with recorded streams, it stays pending until their events complete;
  // else it merges into the free sets at once. On an error recording the events, `b`
  // is unchanged (still allocated).
  absl::Status FreeLocked(Block* b, size_t requested);
  // Releases cached memory while cached bytes are over cache_limit (if set).
  void EnforceCacheLimitLocked(Sink* sink);
  // Takes back a block from a thread cache (already out of the allocation map).
  void ReturnCachedBlockLocked(Block* b);
  // Retires completed events (with `wait`, waits for all of them), then releases every
  // fully free segment and idle chunk; returns the first event error.
  absl::Status ReleaseCacheLocked(bool wait, Sink* sink);

  // The error for `ptr`, which is not a live allocation, passed to `what`.
  absl::Status BadPointerLocked(const void* ptr, const char* what) const;
  // Every segment and its blocks, in address order.
  std::vector<SegmentSnapshot> SnapshotLocked() const;
  // The largest block in the free sets.
  int64_t LargestFreeBlockLocked() const { return free_.LargestFreeBlock(); }

 private:
  absl::Status ProcessEventsLocked(bool wait);

  Backend& backend_;
  const AllocatorOptions& opt_;
  PoolStats& stats_;
  const size_t total_bytes_;
  const size_t allowed_max_;  // kNoLimit unless memory_fraction < 1.

  mutable std::mutex mu_;
  FreeSets free_;
  SegmentMap segments_;
  ClassicSegments classic_;
  const std::unique_ptr<ExpandableSegmentSet> expandable_;  // Null without them.
  SegmentReleaser releaser_;
  SegmentGrowth growth_;
  PendingFrees pending_;
};

}  // namespace genesis::memory::pool_internal

#endif  // GENESIS_MEMORY_POOL_CENTRAL_POOL_H_
