#include "genesis/memory/pool/thread_cache.h"

#include <atomic>
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
  stats.Account</*kTaken=*/false>(hot.pool, static_cast<int64_t>(hot.size),
                                  static_cast<int64_t>(hot.requested), hot.split);
  if (hot.over_budget) [[unlikely]] {
    // No room was made for it: it waits for the pool outside the bins. HoldOverBudget
    // made it hot only with `overflow` empty, and nothing else fills it.
    AddBytes(-static_cast<int64_t>(hot.size));
    overflow.store(hot.block, std::memory_order_relaxed);
  } else {
    // Fits was checked when the block became hot, counting it.
    hot.bin->push_back({hot.block, hot.ptr, hot.seq, hot.pool, hot.split});
  }
  hot.block = nullptr;
}

void ThreadCache::Forget() {
  Settle();
  hot = {};
  bins.clear();
  for (RecentBin& r : recent) r = {};
  for (HandedOut& h : handed_out) h = {};
}

void ThreadCache::TakeBlocks(std::vector<Block*>* blocks) {
  Settle();
  for (auto& [key, bin] : bins) {
    for (const Cached& c : bin) blocks->push_back(c.block);
    bin.clear();
  }
  if (Block* b = TakeOverflow()) blocks->push_back(b);
  bytes.store(0, std::memory_order_relaxed);
}

}  // namespace genesis::memory::pool_internal
