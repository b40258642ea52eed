// Timeline: allocated and reserved bytes of each observed pool over time, rebuilt from a
// History's events. Summaries, the Chrome trace and the picture draw from it.
#ifndef GENESIS_PROFILER_TIMELINE_H_
#define GENESIS_PROFILER_TIMELINE_H_

#include <cstdint>
#include <vector>

#include "genesis/profiler/history.h"

namespace genesis::profiler {

struct TimelinePoint {
  int64_t time_ns = 0;
  int64_t allocated = 0;
  int64_t reserved = 0;
};

struct SourceTimeline {
  // The value at the history's start, then one point per event that changed a value
  // (events at the same time folded into one point), in time order.
  std::vector<TimelinePoint> points;
  // The highest values and the first time they were reached.
  int64_t peak_allocated = 0;
  int64_t peak_allocated_ns = 0;
  int64_t peak_reserved = 0;
  int64_t peak_reserved_ns = 0;
};

// One entry per History::sources. Frees of blocks whose allocation the history does not
// hold still count (they were allocated before recording began or dropped from a ring).
std::vector<SourceTimeline> BuildTimeline(const History& history);

}  // namespace genesis::profiler

#endif  // GENESIS_PROFILER_TIMELINE_H_
