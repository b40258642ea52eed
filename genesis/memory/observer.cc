#include "genesis/memory/observer.h"

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
  }
  return "unknown";
}

}  // namespace genesis::memory
