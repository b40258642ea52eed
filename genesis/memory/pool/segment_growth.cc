#include "genesis/memory/pool/segment_growth.h"

#include <cstdint>

#include "absl/status/status.h"
#include "genesis/memory/pool/size_classes.h"
#include "genesis/memory/pool/stat_index.h"

namespace genesis::memory::pool_internal {

SegmentGrowth::SegmentGrowth(const AllocatorOptions& options, ClassicSegments& classic,
                             ExpandableSegmentSet* expandable, SegmentReleaser& releaser,
                             const SegmentMap& segments, const PoolStats& stats)
    : opt_(options),
      classic_(classic),
      expandable_(expandable),
      releaser_(releaser),
      segments_(segments),
      stats_(stats) {}

absl::StatusOr<Block*> SegmentGrowth::NewSpace(size_t size, size_t segment_size, int pool,
                                               StreamId stream, Sink* sink, OomReason* why) {
  if (expandable_ != nullptr && pool == kLarge) {
    return expandable_->Expand(size, stream, sink, why);
  }
  if (expandable_ == nullptr && pool == kLarge) {
    const size_t grown = GrownSegmentSize(
        size, segment_size, static_cast<size_t>(stats_.GaugeNow(kReservedBytes, kAllPools)),
        opt_);
    if (grown != segment_size) {
      absl::StatusOr<Block*> b = NewClassic(grown, pool, stream, sink, why);
      // Where a grown segment does not fit, the one the block needs may.
      if (b.ok() || !absl::IsResourceExhausted(b.status())) return b;
    }
  }
  return NewClassic(segment_size, pool, stream, sink, why);
}

absl::StatusOr<Block*> SegmentGrowth::NewClassic(size_t segment_size, int pool,
                                                 StreamId stream, Sink* sink,
                                                 OomReason* why) {
  const int64_t over = static_cast<int64_t>(segment_size) +
                       stats_.GaugeNow(kReservedBytes, kAllPools) - segments_.high_water();
  if (expandable_ != nullptr && over > 0) {
    // A small-pool segment beside expandable large blocks: idle large pieces make room
    // for it, as they do for the large pool's own growth, so that the small pool's
    // growth late in a step does not add to a peak the large pool set.
    expandable_->MakeRoom(static_cast<size_t>(over), sink);
  } else if (over > 0) {
    // Classic segments: beyond the reserved high-water mark, fully free segments (least
    // recently used first) go back before the backend is asked for more, so that peak
    // reserved memory follows peak allocated memory instead of keeping segments no
    // request fits; below it (a loop that has warmed up) nothing is released.
    // (Expandable segments do the same with chunks in Expand.)
    releaser_.ReleaseFreeSegments(
        [&] {
          return stats_.GaugeNow(kReservedBytes, kAllPools) +
                     static_cast<int64_t>(segment_size) <=
                 segments_.high_water();
        },
        sink);
  }
  return classic_.NewSegment(segment_size, pool, stream, sink, why);
}

size_t SegmentGrowth::BackendRequest(size_t size, size_t segment_size, int pool) const {
  if (pool != kLarge || expandable_ == nullptr) return segment_size;
  const size_t chunk = expandable_->chunk();
  return (size + chunk - 1) / chunk * chunk;
}

}  // namespace genesis::memory::pool_internal
