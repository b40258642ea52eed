#include "genesis/memory/pool/thread_cache.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <utility>
#include <vector>

namespace genesis::memory::pool_internal {

ThreadCache::BinVector* ThreadCache::FindBin(size_t size, StreamId stream, bool create) {
  RecentBin& r = recent[(size >> 9) & 7];
  const BinKey key{size, stream};
  BinVector* bin = nullptr;
  if (create) {
    bin = &bins[key];
  } else if (auto it = bins.find(key); it != bins.end()) {
    bin = &it->second;
  } else {
    return nullptr;
  }
  r = {key, bin};
  return bin;
}

void ThreadCache::SettleHot() {
  AccountPendingPairs();
  if (hot.taken) return;  // Handed out: nothing is deferred.
  // Fits was checked when the block became hot, counting it.
  hot.bin->push_back({hot.block, hot.ptr, hot.seq, hot.pool, hot.split});
  stats.Account</*kTaken=*/false>(hot.pool, static_cast<int64_t>(hot.size),
                                  static_cast<int64_t>(hot.requested), hot.split);
  hot.block = nullptr;
}

void ThreadCache::Forget() {
  Settle();
  hot = {};
  bins.clear();
  for (RecentBin& r : recent) r = {};
  for (HandedOut& h : handed_out) h = {};
}

void ThreadCache::TakeBlocks(std::vector<Block*>* blocks, size_t at_least) {
  Settle();
  std::vector<std::pair<size_t, BinVector*>> largest_first;
  for (auto& [key, bin] : bins) {
    if (!bin.empty()) largest_first.push_back({key.size, &bin});
  }
  std::sort(largest_first.begin(), largest_first.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  size_t taken = 0;
  for (const auto& [size, bin] : largest_first) {
    for (; !bin->empty() && taken < at_least; bin->pop_back()) {
      blocks->push_back(bin->back().block);
      taken += size;
    }
    if (taken >= at_least) break;
  }
  AddBytes(-static_cast<int64_t>(taken));
}

}  // namespace genesis::memory::pool_internal
