#include "genesis/profiler/event_ring.h"

#include <algorithm>

namespace genesis::profiler {

using memory::fast_log_internal::kRecordLoad;

EventRing::EventRing(size_t capacity, int stack_depth, const std::atomic<int64_t>* clock)
    : stack_depth_(std::max(stack_depth, 0)), log_(capacity, clock) {
  const size_t cap = log_.capacity();
  side_.reset(new std::atomic<uint64_t>[cap * 4]);
  for (size_t i = 0; i < cap * 4; ++i) side_[i].store(0, std::memory_order_relaxed);
  if (stack_depth_ > 0) {
    depths_.reset(new std::atomic<uint32_t>[cap]);
    for (size_t i = 0; i < cap; ++i) depths_[i].store(0, std::memory_order_relaxed);
    const size_t n = cap * static_cast<size_t>(stack_depth_);
    frames_.reset(new std::atomic<uintptr_t>[n]);
    for (size_t i = 0; i < n; ++i) frames_[i].store(0, std::memory_order_relaxed);
  }
}

uint64_t EventRing::Read(std::vector<RingEntry>* out) const {
  const uint64_t cap = log_.capacity();
  const uint64_t head = log_.head();
  const uint64_t first = head > cap ? head - cap : 0;
  std::vector<RingEntry> copied;
  copied.reserve(head - first);
  for (uint64_t i = first; i < head; ++i) {
    RingEntry e;
    e.sequence = i;
    const uint64_t slot = i & (cap - 1);
    const memory::FastEventLog::Record& record = log_.record(i);
    for (int w = 0; w < 4; ++w) e.event.words[w] = record.words[w].load(kRecordLoad);
    for (int w = 0; w < 4; ++w) e.event.words[4 + w] = side_[slot * 4 + w].load(kRecordLoad);
    if (stack_depth_ > 0) {
      const uint32_t depth = std::min<uint32_t>(depths_[slot].load(kRecordLoad),
                                                static_cast<uint32_t>(stack_depth_));
      const std::atomic<uintptr_t>* frames = &frames_[slot * stack_depth_];
      e.stack.reserve(depth);
      for (uint32_t f = 0; f < depth; ++f) e.stack.push_back(frames[f].load(kRecordLoad));
    }
    copied.push_back(std::move(e));
  }
  // Events below begun - cap may have been overwritten, wholly or in part, during the
  // copy; the others were not.
  memory::fast_log_internal::ReaderFence();
  const uint64_t begun = log_.begun();
  const uint64_t valid_from = begun > cap ? begun - cap : 0;
  for (RingEntry& e : copied) {
    if (e.sequence >= valid_from) out->push_back(std::move(e));
  }
  return std::max(first, std::min(valid_from, head));
}

}  // namespace genesis::profiler
