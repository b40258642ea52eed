#include "genesis/memory/observer.h"

#include <algorithm>
#include <bit>
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

FastEventLog::FastEventLog(size_t capacity, const std::atomic<int64_t>* clock)
    : mask_(std::bit_ceil(std::max<size_t>(capacity, 1)) - 1),
      clock_(clock),
      records_(new Record[mask_ + 1]) {
  for (size_t i = 0; i <= mask_; ++i) {
    for (auto& w : records_[i].words) w.store(0, std::memory_order_relaxed);
  }
}

FastEventSink AllocatorObserver::FastSinkForThisThread() { return {}; }

void AllocatorObserver::OnFastEvent(const AllocatorEvent& event) {
  AllocatorEvent stamped = event;
  stamped.timestamp_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::steady_clock::now().time_since_epoch())
                             .count();
  OnEvent(stamped);
}

}  // namespace genesis::memory
