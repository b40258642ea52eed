// How threads find their caches and pools find theirs: per pool, a registry of its
// thread caches that outlives the pool (threads keep it), so that an exiting thread can
// tell whether the pool still exists and give its cache back; per thread, a
// thread_local list of its cache in every pool it used, with the last one used in two
// plain thread_locals so that the fast path finds it with one compare.
//
// Lock order: a registry's mutex, then thread caches' locks, then the pool lock.
#ifndef GENESIS_MEMORY_POOL_THREAD_CACHE_REGISTRY_H_
#define GENESIS_MEMORY_POOL_THREAD_CACHE_REGISTRY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "genesis/memory/owner_lock.h"
#include "genesis/memory/pool/thread_cache.h"

namespace genesis::memory::pool_internal {

// The thread caches of one pool.
struct ThreadCacheRegistry {
  std::mutex mu;
  // Under `mu`. While the pool lives: takes back the cache of an exiting thread, called
  // on that thread (the cache's owner) with `mu` held. Empty once the pool is gone.
  std::function<void(const std::shared_ptr<ThreadCache>&)> adopt;
  // Under `mu`: every cache of the pool.
  std::vector<std::shared_ptr<ThreadCache>> caches;
};

// Holds every cache of a registry as a thread other than their owners (the caller holds
// the registry's mutex), with one process-wide barrier for all of them.
class AllCachesLock {
 public:
  explicit AllCachesLock(const std::vector<std::shared_ptr<ThreadCache>>& caches);
  ~AllCachesLock();
  AllCachesLock(const AllCachesLock&) = delete;
  AllCachesLock& operator=(const AllCachesLock&) = delete;

 private:
  std::vector<OwnerLock*> locks_;
};

// A process-unique id for a new pool (never 0).
uint64_t NewPoolId();

// The cache of the pool this thread used last (found in the thread's list without the
// initialisation check that a thread_local with a destructor costs on every access).
// Constant-initialised, so other files read them without a TLS wrapper call.
inline thread_local uint64_t tls_pool_id = 0;
inline thread_local ThreadCache* tls_pool_cache = nullptr;

// The calling thread's cache in pool `pool_id`, made and registered with `registry` on
// first use (which also forgets this thread's caches of pools that are gone).
ThreadCache* CacheOfThisThreadSlow(uint64_t pool_id,
                                   const std::shared_ptr<ThreadCacheRegistry>& registry);

// CacheOfThisThreadSlow, with the pool this thread used last checked inline first.
inline ThreadCache* CacheOfThisThread(uint64_t pool_id,
                                      const std::shared_ptr<ThreadCacheRegistry>& registry) {
  return tls_pool_id == pool_id ? tls_pool_cache : CacheOfThisThreadSlow(pool_id, registry);
}

}  // namespace genesis::memory::pool_internal

#endif  // GENESIS_MEMORY_POOL_THREAD_CACHE_REGISTRY_H_
