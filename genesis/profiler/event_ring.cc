#include "genesis/profiler/event_ring.h"

#include <algorithm>
#include <bit>

namespace genesis::profiler {

EventRing::EventRing(size_t capacity, int stack_depth)
    : mask_(std::bit_ceil(std::max<size_t>(capacity, 1)) - 1),
      stack_depth_(std::max(stack_depth, 0)),
      slots_(new Slot[mask_ + 1]) {
  for (size_t i = 0; i <= mask_; ++i) {
    for (auto& w : slots_[i].words) w.store(0, std::memory_order_relaxed);
  }
  if (stack_depth_ > 0) {
    const size_t n = (mask_ + 1) * static_cast<size_t>(stack_depth_);
    frames_.reset(new std::atomic<uintptr_t>[n]);
    for (size_t i = 0; i < n; ++i) frames_[i].store(0, std::memory_order_relaxed);
  }
}

uint64_t EventRing::Read(std::vector<RingEntry>* out) const {
  const uint64_t cap = mask_ + 1;
  const uint64_t head = head_.load(std::memory_order_acquire);
  const uint64_t first = head > cap ? head - cap : 0;
  std::vector<RingEntry> copied;
  copied.reserve(head - first);
  for (uint64_t i = first; i < head; ++i) {
    RingEntry e;
    e.sequence = i;
    const Slot& slot = slots_[i & mask_];
    for (int w = 0; w < 8; ++w) {
      e.event.words[w] = slot.words[w].load(ring_internal::kSlotLoad);
    }
    if (stack_depth_ > 0) {
      const uint32_t depth = std::min<uint32_t>(slot.depth.load(ring_internal::kSlotLoad),
                                                static_cast<uint32_t>(stack_depth_));
      const std::atomic<uintptr_t>* frames = &frames_[(i & mask_) * stack_depth_];
      e.stack.reserve(depth);
      for (uint32_t f = 0; f < depth; ++f) {
        e.stack.push_back(frames[f].load(ring_internal::kSlotLoad));
      }
    }
    copied.push_back(std::move(e));
  }
  // Events below begun - cap may have been overwritten, wholly or in part, during the
  // copy; the others were not.
  ring_internal::ReaderFence();
  const uint64_t begun = begun_.load(std::memory_order_relaxed);
  const uint64_t valid_from = begun > cap ? begun - cap : 0;
  for (RingEntry& e : copied) {
    if (e.sequence >= valid_from) out->push_back(std::move(e));
  }
  return std::max(first, std::min(valid_from, head));
}

}  // namespace genesis::profiler
