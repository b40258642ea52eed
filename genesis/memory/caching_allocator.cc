// CachingAllocator: the pieces of the pool (genesis/memory/pool/) wired together. In
// front, per thread, the thread caches (thread_cache.h), found through thread_locals
// (thread_cache_registry.h), and the allocation map of live blocks (allocation_map.h);
// behind them the central pool under one lock (central_pool.h): free sets, segments and
// their growth and release. Allocate and Free try the thread cache inline here, and go
// to the slow paths below otherwise. docs/memory_pool.md maps each concern to its file.
#include "genesis/memory/caching_allocator.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "genesis/core/absl_compat.h"
#include "genesis/core/status.h"
#include "genesis/memory/pool/allocation_map.h"
#include "genesis/memory/pool/block.h"
#include "genesis/memory/pool/cache_transfer.h"
#include "genesis/memory/pool/central_pool.h"
#include "genesis/memory/pool/oom_message.h"
#include "genesis/memory/pool/options_check.h"
#include "genesis/memory/pool/pool_events.h"
#include "genesis/memory/pool/pool_observers.h"
#include "genesis/memory/pool/pool_stats.h"
#include "genesis/memory/pool/size_classes.h"
#include "genesis/memory/pool/summary.h"
#include "genesis/memory/pool/thread_cache.h"
#include "genesis/memory/pool/thread_cache_registry.h"

namespace genesis::memory {

using pool_internal::AllocationMap;
using pool_internal::Block;
using pool_internal::CacheFigures;
using pool_internal::CentralPool;
using pool_internal::FastFreed;
using pool_internal::kAllPools;
using pool_internal::kCachedBytes;
using pool_internal::kLarge;
using pool_internal::kNumCacheHits;
using pool_internal::kNumCacheMisses;
using pool_internal::kSmall;
using pool_internal::OomReason;
using pool_internal::OverCacheLimit;
using pool_internal::PoolObservers;
using pool_internal::PoolStats;
using pool_internal::Sink;
using pool_internal::State;
using pool_internal::ThreadCache;
using pool_internal::ThreadCacheLimits;
using pool_internal::ThreadCacheRegistry;

// The pool. CachingAllocator forwards to it so the header stays free of internals.
class CachingAllocator::Impl {
 public:
  Impl(std::unique_ptr<Backend> backend, AllocatorOptions options,
       std::unique_ptr<StreamEvents> events, size_t total_bytes);
  ~Impl();

  // The commonest pair (the block this thread freed last, allocated and freed again)
  // touches nothing but the thread's cache and the block, and calls nothing (*Hot: the
  // block, or nullptr / false to go on); the other thread-cache hits and frees of
  // blocks this thread took from its cache come next (*Cached); everything else goes to
  // the *Slow functions. Observers do not leave the cached paths: their events go to
  // ReportFast.
  char* AllocateHot(size_t bytes, StreamId stream) {
    if (HotPathIsMine() && bytes <= fast_max_bytes_) {
      return pool_internal::tls_pool_cache->PopHot(bytes, stream, rounding_mask_);
    }
    return nullptr;
  }
  bool FreeHot(void* ptr) {
    return HotPathIsMine() && pool_internal::tls_pool_cache->FreeHot(ptr, cache_limits_);
  }
  absl::StatusOr<void*> AllocateCached(size_t bytes, StreamId stream) {
    if (fast_path_ && bytes <= fast_max_bytes_) {
      const size_t size = pool_internal::RoundedToBlock(bytes, rounding_mask_);
      ThreadCache* cache = MyCache();
      char* const p = cache->Pop(size, stream, bytes);
      ReturnOverflow(*cache);
      if (p != nullptr) {
        if (observers_.observed()) [[unlikely]] {
          observers_.ReportFast(*cache, AllocatorEventType::kAllocate, size, bytes, p, stream);
        }
        return static_cast<void*>(p);
      }
      return AllocateSlow(bytes, stream, /*cache_tried=*/true);
    }
    return AllocateSlow(bytes, stream, /*cache_tried=*/false);
  }
  absl::Status FreeCached(void* ptr) {
    if (ptr == nullptr) return absl::OkStatus();
    if (!fast_path_) return FreeSlow(ptr);
    ThreadCache* cache = MyCache();
    FastFreed freed;
    FastFreed* const report = observers_.observed() ? &freed : nullptr;
    const bool own = cache->FreeOwn(ptr, cache_limits_, report);
    ReturnOverflow(*cache);
    if (own) {
      if (report != nullptr) [[unlikely]] {
        observers_.ReportFast(*cache, AllocatorEventType::kFree, freed.size, freed.requested,
                              ptr, freed.stream);
      }
      return absl::OkStatus();
    }
    return FreeSlow(ptr);
  }
  // `cache_tried`: the thread cache has no block for this request.
  absl::StatusOr<void*> AllocateSlow(size_t bytes, StreamId stream, bool cache_tried);
  absl::Status FreeSlow(void* ptr);
  absl::Status RecordStream(void* ptr, StreamId stream);
  size_t AllocationSize(const void* ptr) const { return map_.AllocatedSize(ptr); }
  absl::Status EmptyCache(bool wait);
  absl::Status WarmUp(absl::Span<const size_t> sizes, StreamId stream);
  MemoryStats Stats() const;
  void ResetPeakStats();
  void ResetAccumulatedStats();
  std::vector<SegmentSnapshot> Snapshot() const;
  std::string Summary() const;
  void AddObserver(std::shared_ptr<AllocatorObserver> observer) {
    std::lock_guard<std::mutex> lock(observers_mu_);
    observers_.Add(std::move(observer), *registry_);
    UpdateHotId();
  }
  void RemoveObserver(const AllocatorObserver* observer) {
    std::lock_guard<std::mutex> lock(observers_mu_);
    observers_.Remove(observer, *registry_);
    UpdateHotId();
  }

  const Backend& backend() const { return *backend_; }
  const AllocatorOptions& options() const { return opt_; }
  bool expandable() const { return central_.expandable(); }

 private:
  ThreadCache* MyCache() { return pool_internal::CacheOfThisThread(id_, registry_); }
  // Whether this thread used this pool last, so that pool_internal::tls_pool_cache is
  // its cache here (never null then).
  bool KnowsMyCache() const { return pool_internal::tls_pool_id == id_; }
  // KnowsMyCache, on a pool whose fast path is on and not observed: the hot pair's one
  // check of the pool.
  bool HotPathIsMine() const {
    return pool_internal::tls_pool_id == hot_id_.load(std::memory_order_relaxed);
  }
  // Under observers_mu_, after the observers changed.
  void UpdateHotId() {
    hot_id_.store(fast_path_ && !observers_.observed() ? id_ : kNoHotPath,
                  std::memory_order_relaxed);
  }
  // Folds this thread's changes before a slow-path call changes the pool's gauges, so
  // that the peaks it raises count them.
  void FoldMyCurrent() { pool_internal::FoldOwnCurrent(*MyCache(), stats_); }
  // Moves every thread's cached blocks back to the free sets. Takes registry, caches
  // and the pool lock, in that order (the pool-wide lock order).
  void FlushThreadCaches();
  // Returns this thread's cached blocks to the free sets; false if it held none.
  bool FlushMyCache();
  // Gives the over-budget block that the last call on `cache` (this thread's) settled
  // back to the pool, if there is one.
  void ReturnOverflow(ThreadCache& cache) {
    if (cache.overflow.load(std::memory_order_relaxed) != nullptr) [[unlikely]] {
      pool_internal::ReturnOwnOverflow(
          cache, stats_, [this](const std::vector<Block*>& blocks) { ReturnCachedBlocks(blocks); });
    }
  }
  // Takes blocks from thread caches out of the map and back into the free sets.
  void ReturnCachedBlocks(const std::vector<Block*>& blocks);
  absl::Status BadPointer(const void* ptr, const char* what) const {
    std::lock_guard<std::mutex> lock(central_.mu());
    return central_.BadPointerLocked(ptr, what);
  }

  const std::unique_ptr<Backend> backend_;
  const AllocatorOptions opt_;
  const std::unique_ptr<StreamEvents> events_;
  const uint64_t id_;
  const bool thread_caches_;
  // Allocate and Free try the thread cache inline: thread caches are on, and no policy
  // (cache_limit) must look at every free.
  const bool fast_path_;
  // Requests up to this size round to block_rounding alone (no power-of-two divisions).
  const size_t fast_max_bytes_;
  const size_t rounding_mask_;  // block_rounding - 1 (a power of two).
  const ThreadCacheLimits cache_limits_;
  std::shared_ptr<ThreadCacheRegistry> registry_;
  // id_ while the hot pair may run (the fast path is on and nobody observes the pool),
  // else kNoHotPath, which no thread's cache id equals.
  static constexpr uint64_t kNoHotPath = ~uint64_t{0};
  std::atomic<uint64_t> hot_id_;
  std::mutex observers_mu_;  // Serialises observer changes with their hot_id_.

  PoolStats stats_;
  AllocationMap map_;
  CentralPool central_;
  PoolObservers observers_;
};

CachingAllocator::Impl::Impl(std::unique_ptr<Backend> backend, AllocatorOptions options,
                             std::unique_ptr<StreamEvents> events, size_t total_bytes)
    : backend_(std::move(backend)),
      opt_(std::move(options)),
      events_(std::move(events)),
      id_(pool_internal::NewPoolId()),
      thread_caches_(opt_.thread_cache_blocks > 0),
      fast_path_(thread_caches_ && opt_.cache_limit == kNoLimit),
      fast_max_bytes_(opt_.roundup_power2_divisions > 1
                          ? opt_.block_rounding
                          : std::numeric_limits<size_t>::max() - opt_.block_rounding),
      rounding_mask_(opt_.block_rounding - 1),
      cache_limits_{opt_.thread_cache_bytes, static_cast<size_t>(opt_.thread_cache_blocks),
                    opt_.cache_limit == kNoLimit && opt_.garbage_collection_threshold == 0.0},
      registry_(std::make_shared<ThreadCacheRegistry>()),
      hot_id_(fast_path_ ? id_ : kNoHotPath),
      central_(*backend_, opt_, events_.get(), total_bytes, stats_),
      observers_(opt_.small_size_limit) {
  registry_->adopt = [this](const std::shared_ptr<ThreadCache>& cache) {
    pool_internal::AdoptExitingCache(
        *registry_, cache, stats_,
        [this](const std::vector<Block*>& blocks) { ReturnCachedBlocks(blocks); });
  };
}

CachingAllocator::Impl::~Impl() {
  // From here on exiting threads leave their caches alone; the blocks in them are
  // freed with their segments when central_ goes.
  std::lock_guard<std::mutex> lock(registry_->mu);
  registry_->adopt = nullptr;
  registry_->caches.clear();
}

void CachingAllocator::Impl::ReturnCachedBlocks(const std::vector<Block*>& blocks) {
  std::lock_guard<std::mutex> lock(central_.mu());
  for (Block* b : blocks) {
    map_.Unregister(b);
    central_.ReturnCachedBlockLocked(b);
  }
}

void CachingAllocator::Impl::FlushThreadCaches() {
  pool_internal::FlushAllCaches(
      *registry_, stats_,
      [this](const std::vector<Block*>& blocks) { ReturnCachedBlocks(blocks); });
}

bool CachingAllocator::Impl::FlushMyCache() {
  return pool_internal::FlushOwnCache(
      *MyCache(), stats_,
      [this](const std::vector<Block*>& blocks) { ReturnCachedBlocks(blocks); });
}

absl::StatusOr<void*> CachingAllocator::Impl::AllocateSlow(size_t bytes, StreamId stream,
                                                           bool cache_tried) {
  GENESIS_ASSIGN_OR_RETURN(const size_t size, pool_internal::RoundSize(bytes, opt_));
  const int pool = pool_internal::PoolFor(size, opt_);
  const bool watch = observers_.observed();
  const int64_t start_ns = watch ? pool_internal::NowNs() : 0;

  if (thread_caches_ && !cache_tried) {
    char* const p = MyCache()->Pop(size, stream, bytes);
    ReturnOverflow(*MyCache());
    if (p != nullptr) {
      if (watch) {
        AllocatorEvent e = pool_internal::MakeEvent(AllocatorEventType::kAllocate, size, bytes,
                                                    p, stream, /*cache_hit=*/true, start_ns);
        e.small_pool = pool == kSmall;
        observers_.Dispatch({e});
      }
      return static_cast<void*>(p);
    }
  }

  GENESIS_ASSIGN_OR_RETURN(const size_t segment_size,
                           pool_internal::SegmentSize(size, pool, opt_));
  // (The Pop above, or AllocateCached's, settled any held block and gave it back.)
  if (thread_caches_) FoldMyCurrent();
  Sink events;
  Sink* sink = watch ? &events : nullptr;
  OomReason why;
  bool hit = false;
  absl::StatusOr<Block*> block;
  {
    std::lock_guard<std::mutex> lock(central_.mu());
    // Memory in a thread cache is reserved but serves only its own size: before an
    // expandable segment maps more for this thread, the pool takes back what this
    // thread's cache holds, where it merges with its neighbours and can be unmapped.
    // (Only this thread's: other threads' cached blocks are in use by them, and
    // unmapping them would make those threads map again. Classic segments do not gain
    // from it: blocks that thread caches keep for their own size fragment segments
    // less than the same blocks split for other sizes.)
    const bool may_grow = !thread_caches_ || pool != kLarge || !expandable();
    block = central_.AllocateLocked(size, bytes, segment_size, pool, stream, may_grow, sink,
                                    &why, &hit);
  }
  if (block.ok() && *block == nullptr) {
    FlushMyCache();
    std::lock_guard<std::mutex> lock(central_.mu());
    block = central_.AllocateLocked(size, bytes, segment_size, pool, stream,
                                    /*may_grow=*/true, sink, &why, &hit);
  }
  if (absl::IsResourceExhausted(block.status())) {
    FlushThreadCaches();
    std::lock_guard<std::mutex> lock(central_.mu());
    block = central_.AllocateAfterOomLocked(size, bytes, segment_size, pool, stream, sink,
                                            &why, &hit);
  }
  if (block.ok()) {
    stats_.CountUnlocked(hit ? kNumCacheHits : kNumCacheMisses);
    map_.Register(*block);
    if (fast_path_) MyCache()->MarkFresh((*block)->ptr);
    if (sink != nullptr) {
      sink->push_back(pool_internal::MakeEvent(AllocatorEventType::kAllocate, (*block)->size,
                                               bytes, (*block)->ptr, stream, hit, start_ns));
      sink->back().small_pool = pool == kSmall;
    }
  }
  if (sink != nullptr) observers_.Dispatch(events);
  if (!block.ok()) return block.status();
  return static_cast<void*>((*block)->ptr);
}

absl::Status CachingAllocator::Impl::FreeSlow(void* ptr) {
  if (ptr == nullptr) return absl::OkStatus();
  // With the fast path on, Free has tried the thread's own cache already.
  if (thread_caches_ && !fast_path_ && !observers_.observed() &&
      MyCache()->FreeOwn(ptr, cache_limits_, nullptr)) {
    if (OverCacheLimit(opt_, stats_.GaugeNow(kCachedBytes, kAllPools))) {
      std::lock_guard<std::mutex> lock(central_.mu());
      central_.EnforceCacheLimitLocked(nullptr);
    }
    return absl::OkStatus();
  }
  bool to_thread_cache = false;
  Block* b = map_.ClaimForFree(
      ptr,
      [this](const Block& block) {
        return thread_caches_ && block.recorded_streams.empty() &&
               (block.pool == kSmall || cache_limits_.large_blocks);
      },
      &to_thread_cache);
  if (b == nullptr) return BadPointer(ptr, "Free");
  const size_t requested = b->requested.load(std::memory_order_relaxed);
  const bool watch = observers_.observed();
  Sink events;
  Sink* sink = watch ? &events : nullptr;
  const int64_t start_ns = watch ? pool_internal::NowNs() : 0;
  if (sink != nullptr) {
    sink->push_back(pool_internal::MakeEvent(AllocatorEventType::kFree, b->size, requested,
                                             b->ptr, b->stream));
    sink->back().small_pool = b->pool == kSmall;
  }
  if (to_thread_cache && !MyCache()->Push(b, requested, cache_limits_)) {
    // No room in the thread's cache. Held over its limits until the thread's next call
    // if the pool has no cache_limit to keep (the pair of the same size again is then the
    // hot pair); else, or if it cannot be held, back to the pool.
    ReturnOverflow(*MyCache());
    if (!fast_path_ || !MyCache()->HoldOverBudget(b, requested, cache_limits_)) {
      map_.Unregister(b);
      to_thread_cache = false;
    }
  }
  if (to_thread_cache) {
    if (OverCacheLimit(opt_, stats_.GaugeNow(kCachedBytes, kAllPools))) {
      std::lock_guard<std::mutex> lock(central_.mu());
      central_.EnforceCacheLimitLocked(sink);
    }
  } else {
    if (thread_caches_) {
      FoldMyCurrent();
      ReturnOverflow(*MyCache());
    }
    absl::Status status;
    {
      std::lock_guard<std::mutex> lock(central_.mu());
      status = central_.FreeLocked(b, requested);
      if (status.ok()) central_.EnforceCacheLimitLocked(sink);
    }
    if (!status.ok()) {
      b->state.store(State::kAllocated, std::memory_order_relaxed);
      map_.Register(b);  // Still allocated: the caller may retry the free.
      return status;
    }
  }
  if (sink != nullptr) {
    events.front().duration_ns = pool_internal::NowNs() - start_ns;
    observers_.Dispatch(events);
  }
  return absl::OkStatus();
}

absl::Status CachingAllocator::Impl::RecordStream(void* ptr, StreamId stream) {
  absl::Status status;
  const bool live = map_.WithAllocated(ptr, [&](Block& b) {
    if (stream == b.stream) return;
    if (events_ == nullptr) {
      status = absl::FailedPreconditionError(absl::StrFormat(
          "RecordStream(%p, %#x): this pool (%s) has no StreamEvents", ptr, stream,
          ToAbsl(backend_->name())));
      return;
    }
    if (std::find(b.recorded_streams.begin(), b.recorded_streams.end(), stream) ==
        b.recorded_streams.end()) {
      b.recorded_streams.push_back(stream);
      // A thread cache that remembers this allocation must no longer free it itself.
      b.alloc_seq.store(b.alloc_seq.load(std::memory_order_relaxed) + 1,
                        std::memory_order_relaxed);
    }
  });
  if (live) return status;
  return BadPointer(ptr, "RecordStream");
}

absl::Status CachingAllocator::Impl::EmptyCache(bool wait) {
  FlushThreadCaches();
  Sink events;
  Sink* sink = observers_.observed() ? &events : nullptr;
  absl::Status status;
  {
    std::lock_guard<std::mutex> lock(central_.mu());
    status = central_.ReleaseCacheLocked(wait, sink);
  }
  if (sink != nullptr) observers_.Dispatch(events);
  return status;
}

absl::Status CachingAllocator::Impl::WarmUp(absl::Span<const size_t> sizes,
                                            StreamId stream) {
  std::vector<void*> ptrs;
  absl::Status status;
  for (size_t size : sizes) {
    absl::StatusOr<void*> p = AllocateCached(size, stream);
    if (!p.ok()) {
      status = Annotate(p.status(), absl::StrCat("WarmUp(", size, " bytes)"));
      break;
    }
    ptrs.push_back(*p);
  }
  for (void* p : ptrs) status.Update(FreeCached(p));
  return status;
}

MemoryStats CachingAllocator::Impl::Stats() const {
  CacheFigures figures;
  pool_internal::ReadAllCaches(*registry_, &figures);
  MemoryStats out = stats_.Collect(figures);
  std::lock_guard<std::mutex> lock(central_.mu());
  out.largest_free_block = central_.LargestFreeBlockLocked();
  return out;
}

void CachingAllocator::Impl::ResetPeakStats() {
  pool_internal::FoldAllCaches(*registry_, stats_);
  std::lock_guard<std::mutex> lock(central_.mu());
  stats_.ResetPeaks();
}

void CachingAllocator::Impl::ResetAccumulatedStats() {
  pool_internal::FoldAllCaches(*registry_, stats_);
  std::lock_guard<std::mutex> lock(central_.mu());
  stats_.ResetAccumulated();
}

std::vector<CachingAllocator::SegmentSnapshot> CachingAllocator::Impl::Snapshot() const {
  std::lock_guard<std::mutex> lock(central_.mu());
  return central_.SnapshotLocked();
}

std::string CachingAllocator::Impl::Summary() const {
  return pool_internal::FormatSummary(Stats(), backend_->device().ToString(),
                                      backend_->name(), expandable(), central_.chunk());
}

// ----- CachingAllocator -----

absl::Status CachingAllocator::ValidateOptions(const AllocatorOptions& options) {
  return pool_internal::ValidateOptions(options);
}

absl::StatusOr<std::unique_ptr<CachingAllocator>> CachingAllocator::Create(
    std::unique_ptr<Backend> backend, AllocatorOptions options,
    std::unique_ptr<StreamEvents> events) {
  if (backend == nullptr) {
    return absl::InvalidArgumentError("CachingAllocator::Create: backend is null");
  }
  GENESIS_RETURN_IF_ERROR(ValidateOptions(options));
  GENESIS_RETURN_IF_ERROR(pool_internal::CheckBackend(*backend, options));
  GENESIS_ASSIGN_OR_RETURN(const size_t total, pool_internal::TotalBytes(*backend, options));
  std::vector<size_t> warm_up = options.warm_up_sizes;
  auto impl = std::make_unique<Impl>(std::move(backend), std::move(options),
                                     std::move(events), total);
  std::unique_ptr<CachingAllocator> pool(new CachingAllocator(std::move(impl)));
  if (!warm_up.empty()) GENESIS_RETURN_IF_ERROR(pool->WarmUp(warm_up, kNoStream));
  return pool;
}

CachingAllocator::CachingAllocator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CachingAllocator::~CachingAllocator() = default;

void* CachingAllocator::AllocateHot(size_t bytes, StreamId stream) {
  return impl_->AllocateHot(bytes, stream);
}
bool CachingAllocator::FreeHot(void* ptr) { return impl_->FreeHot(ptr); }
absl::StatusOr<void*> CachingAllocator::AllocateOther(size_t bytes, StreamId stream) {
  return impl_->AllocateCached(bytes, stream);
}
absl::Status CachingAllocator::FreeOther(void* ptr) { return impl_->FreeCached(ptr); }
absl::Status CachingAllocator::RecordStream(void* ptr, StreamId stream) {
  return impl_->RecordStream(ptr, stream);
}
size_t CachingAllocator::AllocationSize(const void* ptr) const {
  return impl_->AllocationSize(ptr);
}
bool CachingAllocator::Owns(const void* ptr) const { return impl_->AllocationSize(ptr) != 0; }
absl::Status CachingAllocator::EmptyCache() { return impl_->EmptyCache(/*wait=*/false); }
absl::Status CachingAllocator::Compact() { return impl_->EmptyCache(/*wait=*/true); }
absl::Status CachingAllocator::WarmUp(absl::Span<const size_t> sizes, StreamId stream) {
  return impl_->WarmUp(sizes, stream);
}
MemoryStats CachingAllocator::Stats() const { return impl_->Stats(); }
void CachingAllocator::ResetPeakStats() { impl_->ResetPeakStats(); }
void CachingAllocator::ResetAccumulatedStats() { impl_->ResetAccumulatedStats(); }
std::vector<CachingAllocator::SegmentSnapshot> CachingAllocator::Snapshot() const {
  return impl_->Snapshot();
}
std::string CachingAllocator::Summary() const { return impl_->Summary(); }
void CachingAllocator::AddObserver(std::shared_ptr<AllocatorObserver> observer) {
  impl_->AddObserver(std::move(observer));
}
void CachingAllocator::RemoveObserver(const AllocatorObserver* observer) {
  impl_->RemoveObserver(observer);
}
const Backend& CachingAllocator::backend() const { return impl_->backend(); }
const AllocatorOptions& CachingAllocator::options() const { return impl_->options(); }
bool CachingAllocator::expandable_segments() const { return impl_->expandable(); }

}  // namespace genesis::memory
