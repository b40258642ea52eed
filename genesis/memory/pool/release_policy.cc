#include "genesis/memory/pool/release_policy.h"

#include <algorithm>
#include <tuple>
#include <vector>

#include "genesis/memory/pool/stat_index.h"

namespace genesis::memory::pool_internal {

std::vector<Segment*> ReleaseOrder(const absl::flat_hash_set<Segment*>& fully_free,
                                   absl::FunctionRef<bool(size_t)> recurs, bool adaptive) {
  std::vector<Segment*> order(fully_free.begin(), fully_free.end());
  auto recurring = [&](const Segment* s) {
    if (!adaptive) return 0;
    return recurs(s->size) ? 1 : 0;
  };
  std::sort(order.begin(), order.end(), [&](const Segment* a, const Segment* b) {
    return std::make_tuple(recurring(a), a->last_used) <
           std::make_tuple(recurring(b), b->last_used);
  });
  return order;
}

double GarbageCollectionLimit(const AllocatorOptions& options, size_t total_bytes) {
  if (options.garbage_collection_threshold <= 0.0 || total_bytes == 0) return 0.0;
  const double allowed = options.memory_fraction * static_cast<double>(total_bytes);
  return options.garbage_collection_threshold * allowed;
}

SegmentReleaser::SegmentReleaser(const AllocatorOptions& options, size_t total_bytes,
                                 FreeSets& free_sets, ClassicSegments& classic,
                                 ExpandableSegmentSet* expandable, PoolStats& stats)
    : opt_(options),
      total_bytes_(total_bytes),
      free_(free_sets),
      classic_(classic),
      expandable_(expandable),
      stats_(stats) {}

void SegmentReleaser::ReleaseFreeSegments(const std::function<bool()>& done, Sink* sink) {
  if (done()) return;
  if (expandable_ != nullptr) {
    expandable_->UnmapIdleChunks(kNoLimit, done, {}, /*under_pressure=*/false, sink);
    if (!done()) expandable_->ReleaseEmptyRanges();
  }
  if (free_.fully_free().empty()) return;
  const std::vector<Segment*> order = ReleaseOrder(
      free_.fully_free(), [this](size_t size) { return classic_.Recurs(size); },
      opt_.adaptive_caching);
  for (Segment* s : order) {
    if (done()) break;
    classic_.Release(s, sink);
  }
}

absl::Status SegmentReleaser::FinishUnmaps() {
  return expandable_ != nullptr ? expandable_->FinishUnmaps() : absl::OkStatus();
}

void SegmentReleaser::EnforceCacheLimit(Sink* sink) {
  if (opt_.cache_limit == kNoLimit) return;
  ReleaseFreeSegments(
      [this] {
        return stats_.GaugeNow(kCachedBytes, kAllPools) <=
               static_cast<int64_t>(opt_.cache_limit);
      },
      sink);
}

void SegmentReleaser::CollectGarbage(size_t segment_size, Sink* sink) {
  if (opt_.garbage_collection_threshold <= 0.0 || total_bytes_ == 0) return;
  const double threshold = GarbageCollectionLimit(opt_, total_bytes_);
  ReleaseFreeSegments(
      [&] {
        return static_cast<double>(stats_.GaugeNow(kReservedBytes, kAllPools)) +
                   static_cast<double>(segment_size) <=
               threshold;
      },
      sink);
}

}  // namespace genesis::memory::pool_internal
