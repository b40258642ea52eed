#include "genesis/memory/pool/thread_cache_registry.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace genesis::memory::pool_internal {
namespace {

struct TlsEntry {
  uint64_t pool_id;
  std::shared_ptr<ThreadCacheRegistry> registry;
  std::shared_ptr<ThreadCache> cache;
};

// One per thread: the thread's cache in every pool it used.
struct TlsCaches {
  std::vector<TlsEntry> entries;

  ~TlsCaches() {
    tls_pool_id = 0;  // The caches below go back to their pools.
    tls_pool_cache = nullptr;
    for (TlsEntry& e : entries) {
      std::lock_guard<std::mutex> lock(e.registry->mu);
      if (e.registry->adopt) e.registry->adopt(e.cache);
    }
  }
};

TlsCaches& Tls() {
  thread_local TlsCaches caches;
  return caches;
}

std::atomic<uint64_t> next_pool_id{1};

}  // namespace

AllCachesLock::AllCachesLock(const std::vector<std::shared_ptr<ThreadCache>>& caches) {
  locks_.reserve(caches.size());
  for (const auto& cache : caches) locks_.push_back(&cache->mu);
  OwnerLock::LockAll(locks_);
}

AllCachesLock::~AllCachesLock() { OwnerLock::UnlockAll(locks_); }

uint64_t NewPoolId() { return next_pool_id.fetch_add(1); }

ThreadCache* CacheOfThisThreadSlow(uint64_t pool_id,
                                   const std::shared_ptr<ThreadCacheRegistry>& registry) {
  TlsCaches& tls = Tls();
  for (TlsEntry& e : tls.entries) {
    if (e.pool_id == pool_id) {
      tls_pool_id = pool_id;
      tls_pool_cache = e.cache.get();
      return tls_pool_cache;
    }
  }
  // First use of this pool on this thread; drop entries of pools that are gone.
  std::erase_if(tls.entries, [](const TlsEntry& e) {
    std::lock_guard<std::mutex> lock(e.registry->mu);
    return !e.registry->adopt;
  });
  auto cache = std::make_shared<ThreadCache>();
  {
    std::lock_guard<std::mutex> lock(registry->mu);
    registry->caches.push_back(cache);
  }
  tls.entries.push_back(TlsEntry{pool_id, registry, cache});
  tls_pool_id = pool_id;
  tls_pool_cache = cache.get();
  return tls_pool_cache;
}

}  // namespace genesis::memory::pool_internal
