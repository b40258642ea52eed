#include "genesis/profiler/timeline.h"

namespace genesis::profiler {

std::vector<SourceTimeline> BuildTimeline(const History& history) {
  std::vector<SourceTimeline> out(history.sources.size());
  for (size_t s = 0; s < history.sources.size(); ++s) {
    const SourceInfo& info = history.sources[s];
    SourceTimeline& t = out[s];
    t.points.push_back({history.start_ns, info.allocated_at_start, info.reserved_at_start});
    t.peak_allocated = info.allocated_at_start;
    t.peak_reserved = info.reserved_at_start;
    t.peak_allocated_ns = t.peak_reserved_ns = history.start_ns;
  }
  for (const Event& e : history.events) {
    if (e.source < 0 || e.source >= static_cast<int>(out.size())) continue;
    const auto size = static_cast<int64_t>(e.size);
    int64_t d_alloc = 0, d_reserved = 0;
    switch (e.kind) {
      case EventKind::kAlloc:
        d_alloc = size;
        break;
      case EventKind::kFree:
        d_alloc = -size;
        break;
      case EventKind::kSegmentAlloc:
      case EventKind::kSegmentMap:
        d_reserved = size;
        break;
      case EventKind::kSegmentFree:
      case EventKind::kSegmentUnmap:
        d_reserved = -size;
        break;
      default:
        continue;
    }
    SourceTimeline& t = out[e.source];
    TimelinePoint p = t.points.back();
    p.allocated += d_alloc;
    p.reserved += d_reserved;
    if (p.allocated > t.peak_allocated) {
      t.peak_allocated = p.allocated;
      t.peak_allocated_ns = e.time_ns;
    }
    if (p.reserved > t.peak_reserved) {
      t.peak_reserved = p.reserved;
      t.peak_reserved_ns = e.time_ns;
    }
    if (t.points.back().time_ns == e.time_ns && t.points.size() > 1) {
      t.points.back() = {e.time_ns, p.allocated, p.reserved};
    } else {
      t.points.push_back({e.time_ns, p.allocated, p.reserved});
    }
  }
  return out;
}

}  // namespace genesis::profiler
