// A pool's observers: the list that slow-path events are dispatched to once the pool's
// locks are released, and the list published to the fast path, whose events go, without
// leaving it, into the calling thread's log from the pool's one observer
// (FastSinkForThisThread) or else to the observers' OnFastEvent.
#ifndef GENESIS_MEMORY_POOL_POOL_OBSERVERS_H_
#define GENESIS_MEMORY_POOL_POOL_OBSERVERS_H_

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "genesis/memory/observer.h"
#include "genesis/memory/owner_lock.h"
#include "genesis/memory/pool/pool_events.h"
#include "genesis/memory/pool/thread_cache.h"
#include "genesis/memory/pool/thread_cache_registry.h"
#include "genesis/memory/stream_events.h"

namespace genesis::memory::pool_internal {

class PoolObservers {
 public:
  // `small_size_limit` tells fast-path events which pool a block came from.
  explicit PoolObservers(size_t small_size_limit);
  PoolObservers(const PoolObservers&) = delete;
  PoolObservers& operator=(const PoolObservers&) = delete;

  // True if any observer is attached (a relaxed read: the fast path's one check).
  bool observed() const { return num_observers_.load(std::memory_order_relaxed) > 0; }

  // Passes `events` to every observer attached now. Call with no pool lock held.
  void Dispatch(const Sink& events);

  // Reports a fast-path event of the calling thread (`cache` is its cache), holding its
  // report_mu as owner (no pool lock, no allocation): into the sink of the pool's one
  // observer if it gave one, else to the observers' OnFastEvent (ReportFastSlow).
  [[gnu::always_inline]] void ReportFast(ThreadCache& cache, AllocatorEventType type,
                                         size_t size, size_t requested, const void* ptr,
                                         StreamId stream) {
    OwnerLock::AsOwner lock(cache.report_mu);
    if (cache.sink.log != nullptr && (requested >> FastEventLog::kTagShift) == 0)
        [[likely]] {
      cache.sink.log->AppendFast(type == AllocatorEventType::kAllocate
                                     ? FastEventLog::kAllocate
                                     : FastEventLog::kFree,
                                 ptr, stream, requested, cache.sink.tag);
      return;
    }
    ReportFastSlow(cache, type, size, requested, ptr, stream);
  }

  // Attaches `observer` (null: nothing); events reach it after this returns. The
  // registry's caches ask for their fast-path sinks again.
  void Add(std::shared_ptr<AllocatorObserver> observer, ThreadCacheRegistry& registry);
  // Detaches every registration of `observer`; once this returns, no fast-path report
  // into it is in progress (slow-path events already being dispatched may still reach
  // it).
  void Remove(const AllocatorObserver* observer, ThreadCacheRegistry& registry);

 private:
  // The caller holds cache.report_mu as owner.
  [[gnu::noinline]] void ReportFastSlow(ThreadCache& cache, AllocatorEventType type,
                                        size_t size, size_t requested, const void* ptr,
                                        StreamId stream);
  // Publishes observers_ to the fast path and waits until no fast-path report uses the
  // list it replaces. The caller holds mu_.
  void PublishLocked(ThreadCacheRegistry& registry);

  // The observers, published for the fast path, which reads them without a lock.
  // Replaced (never changed) when observers come or go.
  struct ObserverList {
    std::vector<std::shared_ptr<AllocatorObserver>> observers;
  };

  const size_t small_size_limit_;
  std::atomic<int> num_observers_{0};
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<AllocatorObserver>> observers_;
  std::atomic<const ObserverList*> fast_observers_{nullptr};
  std::unique_ptr<const ObserverList> fast_observers_owner_;
};

}  // namespace genesis::memory::pool_internal

#endif  // GENESIS_MEMORY_POOL_POOL_OBSERVERS_H_
