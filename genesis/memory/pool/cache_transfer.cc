#include "genesis/memory/pool/cache_transfer.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "genesis/memory/owner_lock.h"

namespace genesis::memory::pool_internal {

void TakeCachedBlocks(ThreadCache& cache, PoolStats& stats, std::vector<Block*>* blocks) {
  cache.TakeBlocks(blocks);
  stats.Fold(cache.stats);
}

void FlushAllCaches(ThreadCacheRegistry& registry, PoolStats& stats, GiveBack give_back) {
  std::lock_guard<std::mutex> registry_lock(registry.mu);
  std::vector<Block*> blocks;
  {
    AllCachesLock caches_lock(registry.caches);
    for (const auto& cache : registry.caches) TakeCachedBlocks(*cache, stats, &blocks);
  }
  if (blocks.empty()) return;
  give_back(blocks);
}

bool FlushOwnCache(ThreadCache& cache, PoolStats& stats, GiveBack give_back) {
  std::vector<Block*> blocks;
  {
    OwnerLock::AsOwner lock(cache.mu);
    if (cache.bytes.load(std::memory_order_relaxed) == 0 &&
        cache.overflow.load(std::memory_order_relaxed) == nullptr) {
      return false;
    }
    TakeCachedBlocks(cache, stats, &blocks);
  }
  give_back(blocks);
  return true;
}

void ReturnOwnOverflow(ThreadCache& cache, PoolStats& stats, GiveBack give_back) {
  Block* b;
  {
    OwnerLock::AsOwner lock(cache.mu);
    b = cache.TakeOverflow();
    if (b == nullptr) return;  // A flush took it first.
    stats.Fold(cache.stats);
  }
  give_back({b});
}

void AdoptExitingCache(ThreadCacheRegistry& registry, const std::shared_ptr<ThreadCache>& cache,
                       PoolStats& stats, GiveBack give_back) {
  std::erase(registry.caches, cache);
  std::vector<Block*> blocks;
  {
    // Called on the exiting thread itself, the cache's owner.
    OwnerLock::AsOwner lock(cache->mu);
    TakeCachedBlocks(*cache, stats, &blocks);
    cache->Forget();
  }
  give_back(blocks);
}

void FoldOwnCurrent(ThreadCache& cache, PoolStats& stats) {
  OwnerLock::AsOwner lock(cache.mu);
  cache.Settle();
  stats.FoldCurrent(cache.stats);
}

void FoldAllCaches(ThreadCacheRegistry& registry, PoolStats& stats) {
  std::lock_guard<std::mutex> registry_lock(registry.mu);
  AllCachesLock caches_lock(registry.caches);
  for (const auto& cache : registry.caches) {
    cache->Settle();
    stats.Fold(cache->stats);
  }
}

void ReadAllCaches(ThreadCacheRegistry& registry, CacheFigures* figures) {
  std::lock_guard<std::mutex> registry_lock(registry.mu);
  AllCachesLock caches_lock(registry.caches);
  figures->excess.reserve(registry.caches.size());
  for (const auto& cache : registry.caches) {
    cache->Settle();
    figures->Add(cache->stats);
  }
}

}  // namespace genesis::memory::pool_internal
