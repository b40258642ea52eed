#include "genesis/profiler/history.h"

#include "absl/strings/str_cat.h"

namespace genesis::profiler {

std::string_view EventKindName(EventKind kind) {
  switch (kind) {
    case EventKind::kAlloc:
      return "alloc";
    case EventKind::kFree:
      return "free";
    case EventKind::kSegmentAlloc:
      return "segment_alloc";
    case EventKind::kSegmentFree:
      return "segment_free";
    case EventKind::kSegmentMap:
      return "segment_map";
    case EventKind::kSegmentUnmap:
      return "segment_unmap";
    case EventKind::kOom:
      return "oom";
    case EventKind::kMarker:
      return "marker";
  }
  return "unknown";
}

std::string SourceLabel(const SourceInfo& source) {
  return absl::StrCat(source.device, "/", source.name);
}

}  // namespace genesis::profiler
