#include "genesis/memory/pool/free_sets.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>

namespace genesis::memory::pool_internal {

FreeSets::FreeSets(const AllocatorOptions& options, PoolStats& stats)
    : opt_(options), stats_(stats) {}

FreeSets::~FreeSets() {
  for (Block* b : spare_blocks_) delete b;
}

void FreeSets::Insert(Block* b) {
  b->state.store(State::kFree, std::memory_order_relaxed);
  free_[b->pool].insert(b);
  if (IsSplit(b)) {
    stats_.AddGauge(kInactiveSplitBytes, b->pool, static_cast<int64_t>(b->size));
  } else {
    fully_free_.insert(b->segment);
  }
}

void FreeSets::Erase(Block* b) {
  free_[b->pool].erase(b);
  if (IsSplit(b)) {
    stats_.AddGauge(kInactiveSplitBytes, b->pool, -static_cast<int64_t>(b->size));
  } else {
    fully_free_.erase(b->segment);
  }
}

Block* FreeSets::NewBlock() {
  if (spare_blocks_.empty()) return new Block;
  Block* b = spare_blocks_.back();
  spare_blocks_.pop_back();
  return b;
}

void FreeSets::Recycle(Block* b) {
  // Everything but alloc_seq is reset; alloc_seq keeps counting so that a stale
  // handed-out entry can never match again.
  b->ptr = nullptr;
  b->size = 0;
  b->stream = kNoStream;
  b->segment = nullptr;
  b->prev = b->next = nullptr;
  b->state.store(State::kFree, std::memory_order_relaxed);
  b->requested.store(0, std::memory_order_relaxed);
  b->recorded_streams.clear();
  b->pending_events = 0;
  spare_blocks_.push_back(b);
}

Block* FreeSets::FreeAndMerge(Block* b) {
  if (Block* prev = b->prev;
      prev != nullptr && prev->state.load(std::memory_order_relaxed) == State::kFree) {
    Erase(prev);
    prev->size += b->size;
    prev->next = b->next;
    if (b->next != nullptr) b->next->prev = prev;
    Recycle(b);
    b = prev;
  }
  if (Block* next = b->next;
      next != nullptr && next->state.load(std::memory_order_relaxed) == State::kFree) {
    Erase(next);
    b->size += next->size;
    b->next = next->next;
    if (next->next != nullptr) next->next->prev = b;
    Recycle(next);
  }
  Insert(b);
  b->segment->last_used = ++tick_;
  return b;
}

Block* FreeSets::FindBestFit(int pool, StreamId stream, size_t size) const {
  const BlockSet& set = free_[pool];
  auto it = set.lower_bound(FreeKey{stream, size, nullptr});
  if (it == set.end() || (*it)->stream != stream) return nullptr;
  Block* b = *it;
  if (pool == kLarge && opt_.max_split_size != kNoLimit && !b->segment->expandable) {
    // Like PyTorch: small requests do not eat oversize (unsplittable) blocks, and large
    // requests take an oversize block only if little of it is wasted.
    if (size < opt_.max_split_size && b->size > opt_.max_split_size) return nullptr;
    if (size >= opt_.max_split_size && b->size - size >= opt_.large_segment_size) {
      return nullptr;
    }
  }
  return b;
}

void FreeSets::Take(Block* b, size_t size, size_t requested) {
  Erase(b);
  const size_t remaining = b->size - size;
  // Large blocks keep small remainders (they would only fragment the large pool),
  // except in expandable segments, where the remainder shares mapped chunks with its
  // neighbours anyway and merges with the next mapping.
  const bool split = b->pool == kSmall || b->segment->expandable
                         ? remaining >= opt_.block_rounding
                         : remaining > opt_.small_size_limit &&
                               b->size <= opt_.max_split_size;
  if (split) Insert(Split(b, size));
  b->alloc_seq.store(b->alloc_seq.load(std::memory_order_relaxed) + 1,
                     std::memory_order_relaxed);
  b->state.store(State::kAllocated, std::memory_order_relaxed);
  b->requested.store(requested, std::memory_order_relaxed);
  b->split = IsSplit(b);
  b->segment->last_used = ++tick_;
  const int64_t s = static_cast<int64_t>(b->size);
  stats_.AddGauge(kAllocatedBytes, b->pool, s);
  stats_.AddGauge(kCachedBytes, b->pool, -s);
  stats_.AddGauge(kActiveBytes, b->pool, s);
  stats_.AddGauge(kRequestedBytes, b->pool, static_cast<int64_t>(requested));
  stats_.Count(kNumAllocations);
}

Block* FreeSets::Split(Block* b, size_t offset) {
  Block* rest = NewBlock();
  rest->ptr = b->ptr + offset;
  rest->size = b->size - offset;
  rest->stream = b->stream;
  rest->pool = b->pool;
  rest->segment = b->segment;
  rest->state.store(b->state.load(std::memory_order_relaxed), std::memory_order_relaxed);
  rest->prev = b;
  rest->next = b->next;
  if (b->next != nullptr) b->next->prev = rest;
  b->next = rest;
  b->size = offset;
  return rest;
}

int64_t FreeSets::LargestFreeBlock() const {
  // The last block of each stream's run in a free set is that stream's largest.
  int64_t largest = 0;
  for (int pool : {kSmall, kLarge}) {
    const BlockSet& set = free_[pool];
    for (auto it = set.begin(); it != set.end();) {
      auto end = set.upper_bound(FreeKey{(*it)->stream, kNoLimit, nullptr});
      largest = std::max<int64_t>(largest, static_cast<int64_t>((*std::prev(end))->size));
      it = end;
    }
  }
  return largest;
}

}  // namespace genesis::memory::pool_internal
