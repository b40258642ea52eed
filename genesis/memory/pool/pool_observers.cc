#include "genesis/memory/pool/pool_observers.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace genesis::memory::pool_internal {

PoolObservers::PoolObservers(size_t small_size_limit) : small_size_limit_(small_size_limit) {}

void PoolObservers::Dispatch(const Sink& events) {
  if (events.empty()) return;
  std::vector<std::shared_ptr<AllocatorObserver>> observers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    observers = observers_;
  }
  for (const AllocatorEvent& e : events) {
    for (const auto& o : observers) o->OnEvent(e);
  }
}

void PoolObservers::ReportFastSlow(ThreadCache& cache, AllocatorEventType type, size_t size,
                                   size_t requested, const void* ptr, StreamId stream) {
  const ObserverList* list = fast_observers_.load(std::memory_order_acquire);
  if (list == nullptr) return;
  if (!cache.sink_asked) {
    cache.sink_asked = true;
    if (list->observers.size() == 1) cache.sink = list->observers[0]->FastSinkForThisThread();
    if (cache.sink.log != nullptr && (requested >> FastEventLog::kTagShift) == 0) {
      cache.sink.log->AppendFast(type == AllocatorEventType::kAllocate
                                     ? FastEventLog::kAllocate
                                     : FastEventLog::kFree,
                                 ptr, stream, requested, cache.sink.tag);
      return;
    }
  }
  AllocatorEvent e;
  e.type = type;
  e.size = size;
  e.requested = requested;
  e.address = ptr;
  e.stream = stream;
  e.cache_hit = type == AllocatorEventType::kAllocate;
  e.thread_id = ThisThreadId();
  e.small_pool = size < small_size_limit_;
  e.from_thread_cache = true;
  for (const auto& o : list->observers) o->OnFastEvent(e);
}

void PoolObservers::PublishLocked(ThreadCacheRegistry& registry) {
  auto list = std::make_unique<ObserverList>();
  list->observers = observers_;
  fast_observers_.store(list.get(), std::memory_order_release);
  // Fast-path reports that loaded the old list (or use a sink from it) hold their
  // thread's report_mu; taking each (as another thread) waits for them, and the sinks,
  // cleared, are asked for again from the new list. The caches are copied first so
  // that a report calling Stats() (which takes the registry's mutex) cannot deadlock
  // with this.
  std::vector<std::shared_ptr<ThreadCache>> caches;
  {
    std::lock_guard<std::mutex> lock(registry.mu);
    caches = registry.caches;
  }
  std::vector<OwnerLock*> locks;
  locks.reserve(caches.size());
  for (const auto& c : caches) locks.push_back(&c->report_mu);
  if (!locks.empty()) {
    OwnerLock::LockAll(locks);
    for (const auto& c : caches) {
      c->sink = {};
      c->sink_asked = false;
    }
    OwnerLock::UnlockAll(locks);
  }
  fast_observers_owner_ = std::move(list);
}

void PoolObservers::Add(std::shared_ptr<AllocatorObserver> observer,
                        ThreadCacheRegistry& registry) {
  if (observer == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  observers_.push_back(std::move(observer));
  PublishLocked(registry);
  num_observers_.store(static_cast<int>(observers_.size()), std::memory_order_relaxed);
}

void PoolObservers::Remove(const AllocatorObserver* observer, ThreadCacheRegistry& registry) {
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(observers_, [observer](const auto& o) { return o.get() == observer; });
  num_observers_.store(static_cast<int>(observers_.size()), std::memory_order_relaxed);
  PublishLocked(registry);
}

}  // namespace genesis::memory::pool_internal
