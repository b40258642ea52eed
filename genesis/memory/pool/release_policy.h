// When the pool gives cached memory back to its backend: the order in which fully free
// classic segments go (least recently used first; with adaptive_caching, sizes
// allocated once before sizes that recur), after the idle chunks of expandable
// segments; and the policies that ask for it: cache_limit after a free, the garbage-
// collection threshold before growth, everything at once (EmptyCache, the OOM retry).
// All under the pool lock.
#ifndef GENESIS_MEMORY_POOL_RELEASE_POLICY_H_
#define GENESIS_MEMORY_POOL_RELEASE_POLICY_H_

#include <cstddef>
#include <functional>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "genesis/memory/allocator_options.h"
#include "genesis/memory/pool/block.h"
#include "genesis/memory/pool/classic_segments.h"
#include "genesis/memory/pool/expandable_segments.h"
#include "genesis/memory/pool/free_sets.h"
#include "genesis/memory/pool/pool_events.h"
#include "genesis/memory/pool/pool_stats.h"

namespace genesis::memory::pool_internal {

// The fully free segments in the order they are released: with `adaptive`, those whose
// size does not recur (`recurs(size)` false) first; then least recently used first.
std::vector<Segment*> ReleaseOrder(const absl::flat_hash_set<Segment*>& fully_free,
                                   absl::FunctionRef<bool(size_t)> recurs, bool adaptive);

// True if `cached` bytes are over `options.cache_limit` (never with no limit).
inline bool OverCacheLimit(const AllocatorOptions& options, int64_t cached) {
  return options.cache_limit != kNoLimit && cached > static_cast<int64_t>(options.cache_limit);
}

// The reserved bytes that garbage collection keeps the pool under:
// garbage_collection_threshold x memory_fraction x `total_bytes`; 0 if it is off (or the
// total is unknown).
double GarbageCollectionLimit(const AllocatorOptions& options, size_t total_bytes);

class SegmentReleaser {
 public:
  // Everything passed must outlive this; `expandable` is null when the pool has no
  // expandable segments.
  SegmentReleaser(const AllocatorOptions& options, size_t total_bytes, FreeSets& free_sets,
                  ClassicSegments& classic, ExpandableSegmentSet* expandable,
                  PoolStats& stats);
  SegmentReleaser(const SegmentReleaser&) = delete;
  SegmentReleaser& operator=(const SegmentReleaser&) = delete;

  // Unmaps idle chunks of expandable segments and gives back their empty ranges, then
  // releases fully free classic segments in ReleaseOrder, until `done()` (checked
  // before each step) or nothing is left.
  void ReleaseFreeSegments(const std::function<bool()>& done, Sink* sink);
  // Waits until what ReleaseFreeSegments unmapped is back with the device (expandable
  // segments may give memory back after their unmap returned); an unmap's error.
  absl::Status FinishUnmaps();
  // ReleaseFreeSegments until cached bytes are within cache_limit (if set).
  void EnforceCacheLimit(Sink* sink);
  // ReleaseFreeSegments until a new segment of `segment_size` fits under
  // GarbageCollectionLimit (if set).
  void CollectGarbage(size_t segment_size, Sink* sink);

 private:
  const AllocatorOptions& opt_;
  const size_t total_bytes_;
  FreeSets& free_;
  ClassicSegments& classic_;
  ExpandableSegmentSet* const expandable_;
  PoolStats& stats_;
};

}  // namespace genesis::memory::pool_internal

#endif  // GENESIS_MEMORY_POOL_RELEASE_POLICY_H_
