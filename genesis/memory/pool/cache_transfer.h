// The hand-off between the thread caches and the central pool: taking the blocks of one
// cache (the calling thread's, or an exiting thread's) or of every cache (flushes), and
// folding the caches' statistics into the pool's, under the locks the pool-wide lock
// order asks for (registry, then caches). The blocks go to a callback that returns them
// to the central free sets.
#ifndef GENESIS_MEMORY_POOL_CACHE_TRANSFER_H_
#define GENESIS_MEMORY_POOL_CACHE_TRANSFER_H_

#include <memory>
#include <vector>

#include "absl/functional/function_ref.h"
#include "genesis/memory/pool/block.h"
#include "genesis/memory/pool/pool_stats.h"
#include "genesis/memory/pool/thread_cache.h"
#include "genesis/memory/pool/thread_cache_registry.h"

namespace genesis::memory::pool_internal {

// Returns blocks taken from thread caches (kThreadCached, still in the allocation map)
// to the central pool.
using GiveBack = absl::FunctionRef<void(const std::vector<Block*>&)>;

// Moves the blocks of `cache` to `blocks` and folds its figures into `stats`. The caller
// holds cache.mu.
void TakeCachedBlocks(ThreadCache& cache, PoolStats& stats, std::vector<Block*>* blocks);

// Takes every cache's blocks (holding the registry's mutex, then every cache as another
// thread) and, if there are any, hands them to `give_back`, still holding the registry's
// mutex.
void FlushAllCaches(ThreadCacheRegistry& registry, PoolStats& stats, GiveBack give_back);

// Takes the blocks of `cache`, the calling thread's own, and hands them to `give_back`;
// false (nothing done) if the cache holds none.
bool FlushOwnCache(ThreadCache& cache, PoolStats& stats, GiveBack give_back);

// Takes the block waiting in the `overflow` of `cache`, the calling thread's own, folds
// the cache's figures into `stats` and hands the block to `give_back`; nothing if a
// flush took it first.
void ReturnOwnOverflow(ThreadCache& cache, PoolStats& stats, GiveBack give_back);

// Removes the cache of an exiting thread (the caller, its owner, holds registry.mu)
// from `registry`, empties it and hands its blocks to `give_back`.
void AdoptExitingCache(ThreadCacheRegistry& registry, const std::shared_ptr<ThreadCache>& cache,
                       PoolStats& stats, GiveBack give_back);

// Folds the calling thread's unfolded changes (its own `cache`) into `stats`, so that
// the peaks that a slow-path call is about to raise count them.
void FoldOwnCurrent(ThreadCache& cache, PoolStats& stats);

// Folds every cache's figures (changes, totals, counters) into `stats`.
void FoldAllCaches(ThreadCacheRegistry& registry, PoolStats& stats);

// Adds every cache's unfolded figures to `figures`, reading each under its lock.
void ReadAllCaches(ThreadCacheRegistry& registry, CacheFigures* figures);

}  // namespace genesis::memory::pool_internal

#endif  // GENESIS_MEMORY_POOL_CACHE_TRANSFER_H_
