// Where new memory comes from when no free block fits: for large blocks of a pool with
// virtual memory, mapped chunks of an expandable segment (ExpandableSegmentSet::Expand);
// otherwise a new classic segment, before which, if it would raise reserved memory
// above the high-water mark, fully free segments go back (least recently used first,
// recurring sizes last), just enough to stay at the mark, so that peak reserved memory
// follows peak allocated memory; beside expandable segments (a small-pool segment),
// idle large pieces are unmapped instead (ExpandableSegmentSet::MakeRoom). Shared large
// segments grow with the pool (GrownSegmentSize, large_segment_max); a grown segment the
// backend or the memory_fraction limit refuses falls back to the ungrown size. All under
// the pool lock.
#ifndef GENESIS_MEMORY_POOL_SEGMENT_GROWTH_H_
#define GENESIS_MEMORY_POOL_SEGMENT_GROWTH_H_

#include <cstddef>

#include "absl/status/statusor.h"
#include "genesis/memory/allocator_options.h"
#include "genesis/memory/pool/block.h"
#include "genesis/memory/pool/classic_segments.h"
#include "genesis/memory/pool/expandable_segments.h"
#include "genesis/memory/pool/oom_message.h"
#include "genesis/memory/pool/pool_events.h"
#include "genesis/memory/pool/pool_stats.h"
#include "genesis/memory/pool/release_policy.h"
#include "genesis/memory/pool/segment_map.h"
#include "genesis/memory/stream_events.h"

namespace genesis::memory::pool_internal {

class SegmentGrowth {
 public:
  // Everything passed must outlive this; `expandable` is null when the pool has no
  // expandable segments.
  SegmentGrowth(const AllocatorOptions& options, ClassicSegments& classic,
                ExpandableSegmentSet* expandable, SegmentReleaser& releaser,
                const SegmentMap& segments, const PoolStats& stats);
  SegmentGrowth(const SegmentGrowth&) = delete;
  SegmentGrowth& operator=(const SegmentGrowth&) = delete;

  // Space for a new block of `size` in `pool` (`segment_size`: the classic segment it
  // takes, SegmentSize, before growth) on `stream`: a free block, in the free sets, that the block can be taken
  // from the start of. ResourceExhausted (with `why`) when memory runs out.
  absl::StatusOr<Block*> NewSpace(size_t size, size_t segment_size, int pool,
                                  StreamId stream, Sink* sink, OomReason* why);
  // What NewSpace asks the backend for: `size` rounded up to chunks where it maps, else
  // `segment_size`.
  size_t BackendRequest(size_t size, size_t segment_size, int pool) const;

 private:
  // A new classic segment of `segment_size`, after the high-water release.
  absl::StatusOr<Block*> NewClassic(size_t segment_size, int pool, StreamId stream,
                                    Sink* sink, OomReason* why);

  const AllocatorOptions& opt_;
  ClassicSegments& classic_;
  ExpandableSegmentSet* const expandable_;
  SegmentReleaser& releaser_;
  const SegmentMap& segments_;
  const PoolStats& stats_;
};

}  // namespace genesis::memory::pool_internal

#endif  // GENESIS_MEMORY_POOL_SEGMENT_GROWTH_H_
