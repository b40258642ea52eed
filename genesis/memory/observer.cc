#include "genesis/memory/observer.h"

#include <chrono>
#include <string_view>

namespace genesis::memory {

std::string_view AllocatorEventTypeName(AllocatorEventType type) {
  switch (type) {
    case AllocatorEventType::kAllocate:
      return "allocate";
    case AllocatorEventType::kFree:
      return "free";
    case AllocatorEventType::kSegmentAlloc:
      return "segment_alloc";
    case AllocatorEventType::kSegmentFree:
      return "segment_free";
    case AllocatorEventType::kOom:
      return "oom";
    case AllocatorEventType::kSegmentMap:
      return "segment_map";
    case AllocatorEventType::kSegmentUnmap:
      return "segment_unmap";
  }
  return "unknown";
}

void AllocatorObserver::OnFastEvent(const AllocatorEvent& event) {
  AllocatorEvent stamped = event;
  stamped.timestamp_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::steady_clock::now().time_since_epoch())
                             .count();
  OnEvent(stamped);
}

}  // namespace genesis::memory
