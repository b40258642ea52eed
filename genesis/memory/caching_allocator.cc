#include "genesis/memory/caching_allocator.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/node_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "genesis/core/absl_compat.h"
#include "genesis/core/byte_size.h"
#include "genesis/core/status.h"
#include "genesis/memory/owner_lock.h"

namespace genesis::memory {
namespace {

// Index of a stats pool: both pools together, or one of them. Blocks and segments store
// kSmall or kLarge so the index needs no translation on the hot path.
constexpr int kAllPools = 0;
constexpr int kSmall = 1;
constexpr int kLarge = 2;
constexpr int kNumStatPools = 3;

enum Gauge {
  kAllocatedBytes,
  kCachedBytes,
  kReservedBytes,
  kActiveBytes,
  kInactiveSplitBytes,
  kRequestedBytes,
  kNumGauges,
};

enum Counter {
  kNumAllocations,
  kNumFrees,
  kNumCacheHits,
  kNumCacheMisses,
  kNumOoms,
  kNumAllocRetries,
  kNumSegmentAllocs,
  kNumSegmentFrees,
  kNumMaps,
  kNumUnmaps,
  kNumCounters,
};

// kFree means "in a free set" and kUnmapped "address space of an expandable segment with
// no memory behind it" (in the unmapped set); both change only under the pool lock. The
// other states are also written by the lock-free fast path, hence the atomic.
enum class State : uint8_t { kAllocated, kFree, kPending, kThreadCached, kUnmapped };

struct Segment;

struct Block {
  char* ptr = nullptr;
  size_t size = 0;
  StreamId stream = kNoStream;
  int pool = kSmall;
  Segment* segment = nullptr;
  // Neighbours in the segment, by address; changed only under the pool lock, and only
  // for blocks in or entering a free set.
  Block* prev = nullptr;
  Block* next = nullptr;
  std::atomic<State> state{State::kFree};
  std::atomic<size_t> requested{0};
  // Bumped each time the block is handed out. Block objects are recycled, never deleted,
  // while the pool lives, so a thread may read this (and `state`) through a stale
  // pointer to tell whether the allocation it remembers is still the current one.
  std::atomic<uint64_t> alloc_seq{0};
  // Mirrors !recorded_streams.empty() for readers that do not hold the map shard.
  std::atomic<bool> has_recorded_streams{false};
  // Streams (other than `stream`) that use the block. Guarded by the allocation-map
  // shard while the block is live; owned by the freeing thread after that.
  std::vector<StreamId> recorded_streams;
  // Events recorded at free time that have not completed (state kPending). Pool lock.
  int pending_events = 0;
  // IsSplit(this) when the pool last handed the block out (set under the pool lock). A
  // block's size and segment do not change while it is allocated or thread-cached, so
  // the fast path reads this instead of the segment.
  bool split = false;
};

struct Segment {
  char* ptr = nullptr;
  size_t size = 0;
  StreamId stream = kNoStream;
  int pool = kSmall;
  Block* head = nullptr;
  uint64_t last_used = 0;
  // An address range of virtual memory, mapped where its blocks are not kUnmapped.
  // Unmapped blocks start and end on chunk boundaries, so the mapped blocks cover
  // whole chunks.
  bool expandable = false;
};

// A block that does not span its segment keeps the segment from being released whole.
// Every block of an expandable segment counts as such.
bool IsSplit(const Block* b) { return b->segment->expandable || b->size != b->segment->size; }

struct FreeKey {
  StreamId stream;
  size_t size;
  const char* ptr;
};

// Best fit: within one stream, the smallest block that is large enough, lowest address
// first among equals (keeps allocations packed towards segment starts).
struct BlockLess {
  using is_transparent = void;
  static FreeKey Key(const Block* b) { return {b->stream, b->size, b->ptr}; }
  static FreeKey Key(const FreeKey& k) { return k; }
  template <class A, class B>
  bool operator()(const A& a, const B& b) const {
    const FreeKey ka = Key(a);
    const FreeKey kb = Key(b);
    return std::tie(ka.stream, ka.size, ka.ptr) < std::tie(kb.stream, kb.size, kb.ptr);
  }
};

struct BinKey {
  size_t size;
  StreamId stream;
  bool operator==(const BinKey&) const = default;
  template <typename H>
  friend H AbslHashValue(H h, const BinKey& k) {
    return H::combine(std::move(h), k.size, k.stream);
  }
};

// A lock for critical sections of a few dozen instructions that are almost never
// contended (a thread's own cache, one of 64 map shards): one atomic exchange to take,
// one store to release, where a pthread mutex costs several times that. A waiter yields
// after a short spin, so a holder that was descheduled is not starved.
class SpinLock {
 public:
  void lock() {
    while (held_.exchange(true, std::memory_order_acquire)) {
      for (int spins = 0; held_.load(std::memory_order_relaxed); ++spins) {
        if (spins >= 64) std::this_thread::yield();
      }
    }
  }
  void unlock() { held_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> held_{false};
};

// Freed small blocks one thread keeps for itself. Its lock is only contended when
// another thread flushes the caches (EmptyCache, Compact, OOM) or reads statistics.
struct ThreadCache {
  // Taken as owner by the thread the cache belongs to (every cached allocate and free),
  // as another thread by flushes and statistics.
  mutable OwnerLock mu;
  // Held as owner while fast-path events go to observers; RemoveObserver takes every
  // thread's, as another thread, to know that no call into a removed observer is left.
  mutable OwnerLock report_mu;
  // Under report_mu: this thread's log from the pool's one observer, asked for once
  // after observers change (sink_asked); cleared whenever they change.
  FastEventSink sink;
  bool sink_asked = false;
  // A cached block with what handing it out again needs, so that a hit reads nothing
  // from the block itself (its fields are written, never waited for).
  struct Cached {
    Block* block;
    char* ptr;
    uint64_t seq;  // The block's alloc_seq.
    int pool;
    bool split;
  };
  using BinVector = std::vector<Cached>;
  // Node-based, so a bin's address is stable and can be remembered in `recent`.
  absl::node_hash_map<BinKey, BinVector> bins;
  // The bins used last, direct-mapped by size: most calls skip the hash lookup.
  struct RecentBin {
    BinKey key{0, kNoStream};
    BinVector* bin = nullptr;
  };
  RecentBin recent[8];

  // The bin of (size, stream); with `create`, made on first use, else nullptr if none.
  BinVector* Bin(size_t size, StreamId stream, bool create) {
    const RecentBin& r = recent[(size >> 9) & 7];
    if (r.bin != nullptr && r.key.size == size && r.key.stream == stream) [[likely]] {
      return r.bin;
    }
    return FindBin(size, stream, create);
  }
  [[gnu::noinline]] BinVector* FindBin(size_t size, StreamId stream, bool create) {
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
  // Bytes of the blocks in `bins`. Written under `mu` (by the owner or a flush); atomic
  // so that the pool can ask, without the lock, whether the cache holds anything.
  std::atomic<size_t> bytes{0};
  void AddBytes(int64_t delta) {
    bytes.store(bytes.load(std::memory_order_relaxed) + static_cast<size_t>(delta),
                std::memory_order_relaxed);
  }
  // Blocks this thread took from its cache, by address (direct-mapped; a collision only
  // sends a free down the ordinary path). Lets the thread free them again without the
  // address map; each entry is checked against the block's alloc_seq before use.
  struct HandedOut {
    const void* ptr = nullptr;
    Block* block = nullptr;
    uint64_t seq = 0;
  };
  static constexpr int kHandedOutSlots = 256;
  static int SlotFor(const void* p) {
    return static_cast<int>(((reinterpret_cast<uintptr_t>(p) >> 9) * 0x9E3779B97F4A7C15ull) >> 56);
  }
  // What this thread's fast path did since its figures were last folded into the
  // pool's atomics, per pool (kSmall, kLarge): the running totals. Taking a block from
  // the cache raises allocated, active and requested bytes and lowers cached (and
  // inactive-split) bytes; putting one back does the reverse. Guarded by `mu`, like the
  // bins, so a flush folds them together with the blocks, and the common path writes
  // no shared cache line.
  struct Totals {
    int64_t popped = 0;  // Bytes of blocks taken from the cache.
    int64_t pushed = 0;  // Bytes of blocks put into it.
    int64_t requested_popped = 0;
    int64_t requested_pushed = 0;
    int64_t split_popped = 0;  // Of those, bytes of blocks that do not span a segment.
    int64_t split_pushed = 0;
    int64_t num_popped = 0;
    int64_t num_pushed = 0;
  };
  Totals totals[kNumStatPools];  // Index kSmall or kLarge.
  // Per stats pool (kAllPools included): the change of the current values that the
  // pool's atomics lack, and the highest each gauge's change reached since the pool's
  // peaks last saw this cache (see CachingAllocator::Impl::FoldCurrent): the peak the
  // pool would have recorded had the fast path written its atomics. Active bytes move
  // with allocated bytes, cached bytes against them.
  struct Unfolded {
    int64_t allocated = 0;
    int64_t requested = 0;
    int64_t split = 0;  // Inactive-split bytes.
    int64_t allocated_high = 0;
    int64_t cached_high = 0;
    int64_t requested_high = 0;
    int64_t split_high = 0;

    int64_t Change(Gauge g) const {
      switch (g) {
        case kAllocatedBytes:
        case kActiveBytes:
          return allocated;
        case kCachedBytes:
          return -allocated;
        case kRequestedBytes:
          return requested;
        case kInactiveSplitBytes:
          return split;
        default:
          return 0;
      }
    }
    int64_t High(Gauge g) const {
      switch (g) {
        case kAllocatedBytes:
        case kActiveBytes:
          return allocated_high;
        case kCachedBytes:
          return cached_high;
        case kRequestedBytes:
          return requested_high;
        case kInactiveSplitBytes:
          return split_high;
        default:
          return 0;
      }
    }
  };
  Unfolded unfolded[kNumStatPools];
  // Last, so that the fields every call touches share few cache lines.
  HandedOut handed_out[kHandedOutSlots];

  // Accounts for a block of `size` bytes (`requested` asked for; `split`: it does not
  // span its segment) taken from the cache (kTaken) or put into it (!kTaken).
  template <bool kTaken>
  void Account(int pool, int64_t size, int64_t requested, bool split) {
    const int64_t split_size = split ? size : 0;
    Totals& t = totals[pool];
    if constexpr (kTaken) {
      t.popped += size;
      t.requested_popped += requested;
      t.split_popped += split_size;
      ++t.num_popped;
    } else {
      t.pushed += size;
      t.requested_pushed += requested;
      t.split_pushed += split_size;
      ++t.num_pushed;
    }
    AccountUnfolded<kTaken>(unfolded[pool], size, requested, split_size);
    AccountUnfolded<kTaken>(unfolded[kAllPools], size, requested, split_size);
  }
  template <bool kTaken>
  static void AccountUnfolded(Unfolded& u, int64_t size, int64_t requested,
                              int64_t split_size) {
    if constexpr (kTaken) {
      u.allocated += size;
      u.requested += requested;
      u.split -= split_size;
      u.allocated_high = std::max(u.allocated_high, u.allocated);
      u.requested_high = std::max(u.requested_high, u.requested);
    } else {
      u.allocated -= size;
      u.requested -= requested;
      u.split += split_size;
      u.cached_high = std::max(u.cached_high, -u.allocated);
      u.split_high = std::max(u.split_high, u.split);
    }
  }

  // Adds the running totals (allocated and freed of each gauge) and counters these
  // totals stand for to the given arrays.
  void AddTotals(int64_t up[kNumGauges][kNumStatPools], int64_t down[kNumGauges][kNumStatPools],
                 int64_t counters[kNumCounters]) const {
    for (int p : {kSmall, kLarge}) {
      const Totals& t = totals[p];
      auto add = [&](Gauge g, int64_t increase, int64_t decrease) {
        for (int q : {kAllPools, p}) {
          up[g][q] += increase;
          down[g][q] += decrease;
        }
      };
      add(kAllocatedBytes, t.popped, t.pushed);
      add(kActiveBytes, t.popped, t.pushed);
      add(kCachedBytes, t.pushed, t.popped);
      add(kRequestedBytes, t.requested_popped, t.requested_pushed);
      add(kInactiveSplitBytes, t.split_pushed, t.split_popped);
      counters[kNumAllocations] += t.num_popped;
      counters[kNumCacheHits] += t.num_popped;
      counters[kNumFrees] += t.num_pushed;
    }
  }
};

// Holds every cache of a registry as a thread other than their owners (the caller holds
// the registry's mutex), with one process-wide barrier for all of them.
class AllCachesLock {
 public:
  explicit AllCachesLock(const std::vector<std::shared_ptr<ThreadCache>>& caches) {
    locks_.reserve(caches.size());
    for (const auto& cache : caches) locks_.push_back(&cache->mu);
    OwnerLock::LockAll(locks_);
  }
  ~AllCachesLock() { OwnerLock::UnlockAll(locks_); }
  AllCachesLock(const AllCachesLock&) = delete;
  AllCachesLock& operator=(const AllCachesLock&) = delete;

 private:
  std::vector<OwnerLock*> locks_;
};

struct alignas(64) CounterShard {
  std::atomic<int64_t> counters[kNumCounters] = {};
  std::atomic<int64_t> gauge_up[kNumGauges][kNumStatPools] = {};
  std::atomic<int64_t> gauge_down[kNumGauges][kNumStatPools] = {};
};
constexpr int kNumCounterShards = 16;

int ThisThreadShard() {
  static std::atomic<int> next{0};
  thread_local const int shard = next.fetch_add(1, std::memory_order_relaxed) %
                                 kNumCounterShards;
  return shard;
}

uint64_t ThisThreadId() {
  thread_local const uint64_t id = std::hash<std::thread::id>()(std::this_thread::get_id());
  return id;
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

AllocatorEvent MakeEvent(AllocatorEventType type, size_t size, size_t requested,
                         const void* address, StreamId stream, bool cache_hit = false,
                         int64_t start_ns = 0) {
  AllocatorEvent e;
  e.type = type;
  e.size = size;
  e.requested = requested;
  e.address = address;
  e.stream = stream;
  e.cache_hit = cache_hit;
  e.thread_id = ThisThreadId();
  e.timestamp_ns = NowNs();
  if (start_ns != 0) e.duration_ns = e.timestamp_ns - start_ns;
  return e;
}

// The observers attached to a pool, published for the fast path, which reads them
// without a lock. Replaced (never changed) when observers come or go.
struct ObserverList {
  std::vector<std::shared_ptr<AllocatorObserver>> observers;
};

// What a free into the thread's own cache gives back, for observers.
struct FastFreed {
  size_t size = 0;
  size_t requested = 0;
  StreamId stream = kNoStream;
};

// Figures here are never negative (the stats' invariants); FormatByteSize takes unsigned.
std::string Human(int64_t n) { return FormatByteSize(static_cast<uint64_t>(n)); }

std::string Bytes(int64_t n) {
  return absl::StrCat(n, " bytes (", Human(n), ")");
}



bool RoundUp(size_t n, size_t multiple, size_t* out) {
  size_t sum = 0;
  if (__builtin_add_overflow(n, multiple - 1, &sum)) return false;
  *out = sum / multiple * multiple;
  return true;
}

struct Registry;

VirtualMemory* ChooseVirtualMemory(Backend& backend, const AllocatorOptions& options) {
  return options.expandable_segments == ExpandableSegments::kOff ? nullptr
                                                                 : backend.virtual_memory();
}

// Address space per expandable range: the backend's memory and an eighth more (at most
// 256 GiB), so a range rarely runs out before the memory does (another range is
// reserved if it does) while many streams' ranges still fit into the address space.
size_t ReservationSize(size_t total_bytes, size_t chunk) {
  if (chunk == 0) return 0;
  constexpr size_t kMaxReservation = size_t{256} << 30;
  const size_t want = total_bytes == 0
                          ? kMaxReservation
                          : std::min(total_bytes + total_bytes / 8, kMaxReservation);
  size_t rounded = 0;
  return RoundUp(want, chunk, &rounded) ? rounded : want / chunk * chunk;
}

// The cache of the pool this thread used last (found in TlsCaches without the
// initialisation check that a thread_local with a destructor costs on every access).
thread_local uint64_t tls_pool_id = 0;
thread_local ThreadCache* tls_pool_cache = nullptr;

}  // namespace

// The pool. CachingAllocator forwards to it so the header stays free of internals.
class CachingAllocator::Impl {
 public:
  Impl(std::unique_ptr<Backend> backend, AllocatorOptions options,
       std::unique_ptr<StreamEvents> events, size_t total_bytes);
  ~Impl();

  // The common cases (a thread-cache hit, a free of a block this thread took from its
  // cache) are inline here; everything else goes to the *Slow functions.
  // Observers do not leave the fast path: its events go to ReportFast.
  absl::StatusOr<void*> Allocate(size_t bytes, StreamId stream) {
    if (fast_path_ && bytes <= fast_max_bytes_) {
      const size_t size = (std::max<size_t>(bytes, 1) + rounding_mask_) & ~rounding_mask_;
      ThreadCache* cache = MyCache();
      if (char* p = CachePop(*cache, size, stream, bytes)) {
        if (observed()) [[unlikely]] {
          ReportFast(*cache, AllocatorEventType::kAllocate, size, bytes, p, stream);
        }
        return static_cast<void*>(p);
      }
      return AllocateSlow(bytes, stream, /*cache_tried=*/true);
    }
    return AllocateSlow(bytes, stream, /*cache_tried=*/false);
  }
  absl::Status Free(void* ptr) {
    if (ptr == nullptr) return absl::OkStatus();
    FastFreed freed;
    if (!fast_path_) return FreeSlow(ptr);
    ThreadCache* cache = MyCache();
    if (FreeToOwnCache(*cache, ptr, &freed)) {
      if (observed()) [[unlikely]] {
        ReportFast(*cache, AllocatorEventType::kFree, freed.size, freed.requested, ptr,
                   freed.stream);
      }
      return absl::OkStatus();
    }
    return FreeSlow(ptr);
  }
  // `cache_tried`: the thread cache has no block for this request.
  absl::StatusOr<void*> AllocateSlow(size_t bytes, StreamId stream, bool cache_tried);
  absl::Status FreeSlow(void* ptr);
  absl::Status RecordStream(void* ptr, StreamId stream);
  size_t AllocationSize(const void* ptr) const;
  absl::Status EmptyCache(bool wait);
  absl::Status WarmUp(absl::Span<const size_t> sizes, StreamId stream);
  MemoryStats Stats() const;
  void ResetPeakStats();
  void ResetAccumulatedStats();
  std::vector<SegmentSnapshot> Snapshot() const;
  std::string Summary() const;
  void AddObserver(std::shared_ptr<AllocatorObserver> observer);
  void RemoveObserver(const AllocatorObserver* observer);

  const Backend& backend() const { return *backend_; }
  const AllocatorOptions& options() const { return opt_; }
  bool expandable() const { return vm_ != nullptr; }

  // Takes back the blocks of a thread's cache when the thread exits. The caller holds
  // registry_->mu and has checked that this pool is alive.
  void AdoptExitingThreadCache(const std::shared_ptr<ThreadCache>& cache);

 private:
  struct OomReason {
    bool limit_hit = false;
    std::string backend_message;
  };
  using Sink = std::vector<AllocatorEvent>;

  struct alignas(64) MapShard {
    mutable SpinLock mu;
    absl::flat_hash_map<const void*, Block*> blocks;
  };
  static constexpr int kNumMapShards = 64;
  MapShard& ShardFor(const void* p) const {
    const uint64_t h = (reinterpret_cast<uintptr_t>(p) >> 9) * 0x9E3779B97F4A7C15ull;
    return map_[h >> 58];
  }

  absl::StatusOr<size_t> RoundSize(size_t bytes) const;
  absl::StatusOr<size_t> SegmentSize(size_t size, int pool) const;

  // Stats.
  void AddGauge(Gauge g, int pool, int64_t delta);
  void RaisePeakTo(Gauge g, int p, int64_t value);
  void Count(Counter c, int64_t n = 1) {
    shards_[ThisThreadShard()].counters[c].fetch_add(n, std::memory_order_relaxed);
  }
  int64_t GaugeNow(Gauge g, int pool) const {
    return cur_[g][pool].load(std::memory_order_relaxed);
  }

  // Thread caches (no pool lock).
  ThreadCache* MyCache() {
    return tls_pool_id == id_ ? tls_pool_cache : MyCacheSlow();
  }
  ThreadCache* MyCacheSlow();
  // Takes a cached block of `size` for `stream` and accounts for the allocation in the
  // thread's own figures; nullptr if the thread has none.
  char* CachePop(size_t size, StreamId stream, size_t requested) {
    return CachePop(*MyCache(), size, stream, requested);
  }
  char* CachePop(ThreadCache& cache, size_t size, StreamId stream, size_t requested);
  bool CachePush(Block* b, size_t requested);
  // `seq`: the block's alloc_seq.
  bool CachePushLocked(ThreadCache& cache, Block* b, size_t requested, uint64_t seq);
  // Frees `ptr` into this thread's cache if this thread took it from there and it is
  // still allocated: no address-map lookup. False sends the free down the usual path.
  // `freed` (if not null) receives the block's size, requested bytes and stream.
  bool FreeToOwnCache(const void* ptr) { return FreeToOwnCache(*MyCache(), ptr, nullptr); }
  bool FreeToOwnCache(ThreadCache& cache, const void* ptr, FastFreed* freed);
  // Raises the pool's peaks to what the cache's highs say they reached, then adds the
  // cache's unfolded changes to the pool's current values. The caller holds cache.mu.
  // Peaks are exact with one thread; with several, a high is set against the pool's
  // current values as they are now, not as they were when the high was reached.
  void FoldCurrent(ThreadCache& cache);
  // FoldCurrent, and moves the cache's running totals and counters into the pool's
  // atomics too, resetting the cache's figures. The caller holds cache.mu.
  void FoldCacheStats(ThreadCache& cache);
  // Folds this thread's changes before a slow-path call changes the pool's gauges, so
  // that the peaks it raises count them.
  void FoldMyCurrent();
  // Moves every thread's cached blocks back to the free sets. Takes registry, caches
  // and the pool lock, in that order (the pool-wide lock order).
  void FlushThreadCaches();
  void ReturnCachedBlocksLocked(const std::vector<Block*>& blocks);

  // The allocation map holds allocated blocks and blocks in thread caches.
  void Register(Block* b);
  void Unregister(Block* b);
  absl::Status BadPointer(const void* ptr, const char* what) const;
  void Dispatch(const Sink& events);
  // Reports a fast-path event of this thread (`cache` is its cache), holding its
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
  // The caller holds cache.report_mu as owner.
  [[gnu::noinline]] void ReportFastSlow(ThreadCache& cache, AllocatorEventType type,
                                        size_t size, size_t requested, const void* ptr,
                                        StreamId stream);
  // Publishes observers_ to the fast path and waits until no fast-path report uses the
  // list it replaces. The caller holds observers_mu_.
  void PublishObserversLocked();
  bool observed() const { return num_observers_.load(std::memory_order_relaxed) > 0; }

  // Everything below needs mu_.
  // A block from the free sets, else (if `may_grow`) from new space; nullptr if none
  // is free and `may_grow` is false.
  absl::StatusOr<Block*> AllocateLocked(size_t size, size_t requested,
                                        size_t segment_size, int pool, StreamId stream,
                                        bool may_grow, Sink* sink, OomReason* why,
                                        bool* hit);
  // Returns this thread's cached blocks to the free sets; false if it held none.
  bool FlushMyCache();
  // Moves a cache's blocks to `blocks` and folds its figures. The caller holds cache.mu.
  void TakeCachedBlocks(ThreadCache& cache, std::vector<Block*>* blocks);
  absl::StatusOr<Block*> AllocateAfterOomLocked(size_t size, size_t requested,
                                                size_t segment_size, int pool,
                                                StreamId stream, Sink* sink,
                                                OomReason* why, bool* hit);
  Block* FindFreeLocked(int pool, StreamId stream, size_t size);
  void TakeBlockLocked(Block* b, size_t size, size_t requested);
  // Cuts `b` (in no set) at `offset` (0 < offset < size); returns the new block that
  // holds the rest, in the same state, in no set.
  Block* SplitLocked(Block* b, size_t offset);
  absl::StatusOr<Block*> NewSegmentLocked(size_t segment_size, int pool,
                                          StreamId stream, Sink* sink, OomReason* why);
  void ReleaseSegmentLocked(Segment* s, Sink* sink);

  // Expandable segments (vm_ != nullptr).
  // A free mapped block of at least `size` for `stream`, made by mapping memory next to
  // (or between) free blocks, in a new address range if no range has room.
  absl::StatusOr<Block*> ExpandLocked(size_t size, StreamId stream, Sink* sink,
                                      OomReason* why);
  absl::StatusOr<Segment*> NewReservationLocked(size_t min_bytes, StreamId stream,
                                                Sink* sink);
  // Maps [begin, end) (chunk-aligned) of the unmapped block `u`; returns the free
  // mapped block that holds it after merging with free neighbours.
  absl::StatusOr<Block*> MapLocked(Block* u, char* begin, char* end, Sink* sink);
  // Unmaps up to `max_bytes` (rounded up to chunks) of the chunks that lie wholly
  // inside the free block `b`, from its end; returns the bytes unmapped.
  size_t UnmapInteriorLocked(Block* b, size_t max_bytes, bool under_pressure, Sink* sink);
  // Puts the unmapped block `u` (in no set) into the unmapped set, merged with
  // unmapped neighbours.
  void InsertUnmappedLocked(Block* u);
  // Unmaps free chunks outside `keep` (blocks about to be used), largest free blocks
  // first, until `bytes` are unmapped, `done()`, or none is left; returns the bytes
  // unmapped. `under_pressure`: to make room at the high-water mark (remembered in
  // pressure_unmapped_).
  size_t UnmapIdleChunksLocked(size_t bytes, const std::function<bool()>& done,
                               std::initializer_list<const Block*> keep,
                               bool under_pressure, Sink* sink);
  // Space for a new block of `size` in `pool`: a new classic segment, or mapped memory
  // in an expandable segment. Returns a free block that can be taken from its start.
  absl::StatusOr<Block*> NewSpaceLocked(size_t size, size_t segment_size, int pool,
                                        StreamId stream, Sink* sink, OomReason* why);
  // Gives back address ranges with nothing mapped.
  void ReleaseEmptyReservationsLocked();
  // Unmaps what is mapped in `s` and gives the range back (destruction).
  void DestroyExpandableSegmentLocked(Segment* s);
  // Releases fully free segments (non-recurring sizes first with adaptive caching,
  // least recently used first) until `done()` or none is left.
  void ReleaseFreeSegmentsLocked(const std::function<bool()>& done, Sink* sink);
  void EnforceCacheLimitLocked(Sink* sink);
  void CollectGarbageLocked(size_t segment_size, Sink* sink);
  absl::Status FreeLocked(Block* b, size_t requested);
  void InsertFreeLocked(Block* b);
  // Block objects are recycled, not deleted, while the pool lives (see Block::alloc_seq).
  Block* NewBlockLocked();
  void RecycleBlockLocked(Block* b);
  void EraseFreeLocked(Block* b);
  // Inserts `b` into its free set, merged with free neighbours; returns the result.
  Block* FreeAndMergeLocked(Block* b);
  absl::Status ProcessEventsLocked(bool wait);
  int64_t LargestFreeBlockLocked() const;
  std::string OomMessageLocked(size_t bytes, size_t size, size_t segment_size,
                               const OomReason& why) const;

  const std::unique_ptr<Backend> backend_;
  const AllocatorOptions opt_;
  const std::unique_ptr<StreamEvents> events_;
  // The backend's virtual memory when large blocks live in expandable segments.
  VirtualMemory* const vm_;
  const size_t chunk_;          // vm_->granularity().
  const size_t reservation_;    // Bytes of address space reserved per range.
  const size_t total_bytes_;
  const size_t allowed_max_;  // kNoLimit unless memory_fraction < 1.
  const uint64_t id_;
  const bool thread_caches_;
  // Allocate and Free try the thread cache inline: thread caches are on, and no policy
  // (cache_limit) must look at every free.
  const bool fast_path_;
  // Requests up to this size round to block_rounding alone (no power-of-two divisions).
  const size_t fast_max_bytes_;
  const size_t rounding_mask_;  // block_rounding - 1 (a power of two).
  // Large blocks are cached per thread only when no policy (cache_limit, garbage
  // collection) must see freed segments at once to release them.
  const bool large_blocks_in_thread_caches_;
  std::shared_ptr<Registry> registry_;

  std::atomic<int64_t> cur_[kNumGauges][kNumStatPools] = {};
  std::atomic<int64_t> peak_[kNumGauges][kNumStatPools] = {};
  CounterShard shards_[kNumCounterShards];
  std::atomic<int64_t> num_segments_{0};

  mutable MapShard map_[kNumMapShards];

  mutable std::mutex mu_;
  std::set<Block*, BlockLess> free_[3];  // Indexed by kSmall / kLarge.
  std::map<uintptr_t, Segment*> segments_;
  absl::flat_hash_set<Segment*> fully_free_;
  std::vector<std::pair<EventId, Block*>> pending_;
  absl::flat_hash_map<size_t, int64_t> segment_size_count_;
  // Unmapped blocks of expandable segments, by stream, size and address.
  std::set<Block*, BlockLess> unmapped_;
  // The most reserved memory so far: below it, expandable segments map new memory
  // freely; above it they unmap idle chunks elsewhere first.
  int64_t reserved_high_water_ = 0;
  // Ranges unmapped to make room at the high-water mark, most recent last (at most
  // kPressureMemory). Mapping one of them again means the two places take turns: the
  // mark then rises instead, so a loop at its peak stops moving memory back and forth.
  static constexpr size_t kPressureMemory = 64;
  std::deque<std::pair<uintptr_t, uintptr_t>> pressure_unmapped_;
  uint64_t tick_ = 0;
  std::vector<Block*> spare_blocks_;

  std::atomic<int> num_observers_{0};
  mutable std::mutex observers_mu_;
  std::vector<std::shared_ptr<AllocatorObserver>> observers_;
  std::atomic<const ObserverList*> fast_observers_{nullptr};
  std::unique_ptr<const ObserverList> fast_observers_owner_;
};

namespace {

// The thread caches of one pool. Outlives the pool (threads keep it through their
// thread-local entries), so an exiting thread can tell whether the pool still exists.
struct Registry {
  std::mutex mu;
  CachingAllocator::Impl* owner = nullptr;
  std::vector<std::shared_ptr<ThreadCache>> caches;
};

struct TlsEntry {
  uint64_t pool_id;
  std::shared_ptr<Registry> registry;
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
      if (e.registry->owner != nullptr) e.registry->owner->AdoptExitingThreadCache(e.cache);
    }
  }
};

TlsCaches& Tls() {
  thread_local TlsCaches caches;
  return caches;
}

std::atomic<uint64_t> next_pool_id{1};

}  // namespace

CachingAllocator::Impl::Impl(std::unique_ptr<Backend> backend, AllocatorOptions options,
                             std::unique_ptr<StreamEvents> events, size_t total_bytes)
    : backend_(std::move(backend)),
      opt_(std::move(options)),
      events_(std::move(events)),
      vm_(ChooseVirtualMemory(*backend_, opt_)),
      chunk_(vm_ != nullptr ? vm_->granularity() : 0),
      reservation_(ReservationSize(total_bytes, chunk_)),
      total_bytes_(total_bytes),
      allowed_max_(opt_.memory_fraction < 1.0
                       ? static_cast<size_t>(opt_.memory_fraction *
                                             static_cast<double>(total_bytes))
                       : kNoLimit),
      id_(next_pool_id.fetch_add(1)),
      thread_caches_(opt_.thread_cache_blocks > 0),
      fast_path_(thread_caches_ && opt_.cache_limit == kNoLimit),
      fast_max_bytes_(opt_.roundup_power2_divisions > 1
                          ? opt_.block_rounding
                          : std::numeric_limits<size_t>::max() - opt_.block_rounding),
      rounding_mask_(opt_.block_rounding - 1),
      large_blocks_in_thread_caches_(opt_.cache_limit == kNoLimit &&
                                     opt_.garbage_collection_threshold == 0.0),
      registry_(std::make_shared<Registry>()) {
  registry_->owner = this;
}

CachingAllocator::Impl::~Impl() {
  {
    // From here on exiting threads leave their caches alone; the blocks in them are
    // freed with their segments below.
    std::lock_guard<std::mutex> lock(registry_->mu);
    registry_->owner = nullptr;
    registry_->caches.clear();
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [event, block] : pending_) {
    (void)events_->Synchronize(event);
    events_->Release(event);
  }
  pending_.clear();
  for (auto& [addr, s] : segments_) {
    if (s->expandable) {
      DestroyExpandableSegmentLocked(s);
    } else {
      backend_->FreeSegment(s->ptr, s->size);
    }
    for (Block* b = s->head; b != nullptr;) {
      Block* next = b->next;
      delete b;
      b = next;
    }
    delete s;
  }
  for (Block* b : spare_blocks_) delete b;
}

// ----- Sizes -----

absl::StatusOr<size_t> CachingAllocator::Impl::RoundSize(size_t bytes) const {
  size_t n = bytes == 0 ? 1 : bytes;
  const int div = opt_.roundup_power2_divisions;
  if (div > 1 && n > opt_.block_rounding) {
    const size_t floor = std::bit_floor(n);
    const size_t step = floor / static_cast<size_t>(div);
    if (floor != n && step > 0 && !RoundUp(n, step, &n)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Allocate: size ", bytes, " overflows when rounded to a power-of-two division"));
    }
  }
  size_t rounded = 0;
  if (!RoundUp(n, opt_.block_rounding, &rounded)) {
    return absl::InvalidArgumentError(absl::StrCat("Allocate: size ", bytes,
                                                   " overflows when rounded up to ",
                                                   opt_.block_rounding, " bytes"));
  }
  return rounded;
}

absl::StatusOr<size_t> CachingAllocator::Impl::SegmentSize(size_t size, int pool) const {
  if (pool == kSmall) return opt_.small_segment_size;
  if (size < opt_.large_segment_threshold) return opt_.large_segment_size;
  size_t rounded = 0;
  if (!RoundUp(size, opt_.large_segment_rounding, &rounded)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Allocate: size ", size, " overflows when rounded up to a segment of ",
        opt_.large_segment_rounding, " bytes"));
  }
  return rounded;
}

// ----- Stats -----

void CachingAllocator::Impl::RaisePeakTo(Gauge g, int p, int64_t value) {
  int64_t peak = peak_[g][p].load(std::memory_order_relaxed);
  while (value > peak &&
         !peak_[g][p].compare_exchange_weak(peak, value, std::memory_order_relaxed)) {
  }
}

void CachingAllocator::Impl::AddGauge(Gauge g, int pool, int64_t delta) {
  if (delta == 0) return;
  CounterShard& shard = shards_[ThisThreadShard()];
  for (int p : {kAllPools, pool}) {
    const int64_t now = cur_[g][p].fetch_add(delta, std::memory_order_relaxed) + delta;
    if (delta > 0) {
      shard.gauge_up[g][p].fetch_add(delta, std::memory_order_relaxed);
      RaisePeakTo(g, p, now);
    } else {
      shard.gauge_down[g][p].fetch_add(-delta, std::memory_order_relaxed);
    }
  }
}

MemoryStats CachingAllocator::Impl::Stats() const {
  // The thread caches' unfolded figures, read under their locks (registry first, as
  // everywhere), added to the atomics below. A cache's high says how far above the
  // pool's current value its unfolded changes went: with the others' unfolded changes
  // as they are now, that is a peak.
  int64_t cache_cur[kNumGauges][kNumStatPools] = {};
  int64_t cache_up[kNumGauges][kNumStatPools] = {};
  int64_t cache_down[kNumGauges][kNumStatPools] = {};
  int64_t cache_counters[kNumCounters] = {};
  // Per cache and gauge: its high minus its unfolded change.
  std::vector<std::array<std::array<int64_t, kNumStatPools>, kNumGauges>> excess;
  {
    std::lock_guard<std::mutex> registry_lock(registry_->mu);
    AllCachesLock caches_lock(registry_->caches);
    excess.resize(registry_->caches.size());
    for (size_t i = 0; i < registry_->caches.size(); ++i) {
      const ThreadCache& cache = *registry_->caches[i];
      cache.AddTotals(cache_up, cache_down, cache_counters);
      for (int g = 0; g < kNumGauges; ++g) {
        for (int p = 0; p < kNumStatPools; ++p) {
          const ThreadCache::Unfolded& u = cache.unfolded[p];
          const int64_t change = u.Change(static_cast<Gauge>(g));
          cache_cur[g][p] += change;
          excess[i][g][p] = u.High(static_cast<Gauge>(g)) - change;
        }
      }
    }
  }
  MemoryStats out;
  PoolMemoryStats* pools[kNumStatPools] = {&out.all, &out.small_pool, &out.large_pool};
  for (int p = 0; p < kNumStatPools; ++p) {
    MemoryStat* stats[kNumGauges] = {
        &pools[p]->allocated_bytes, &pools[p]->cached_bytes,
        &pools[p]->reserved_bytes,  &pools[p]->active_bytes,
        &pools[p]->inactive_split_bytes, &pools[p]->requested_bytes};
    for (int g = 0; g < kNumGauges; ++g) {
      stats[g]->current = cur_[g][p].load(std::memory_order_relaxed) + cache_cur[g][p];
      stats[g]->peak =
          std::max(peak_[g][p].load(std::memory_order_relaxed), stats[g]->current);
      for (const auto& e : excess) {
        if (g != kReservedBytes) {
          stats[g]->peak = std::max(stats[g]->peak, stats[g]->current + e[g][p]);
        }
      }
      stats[g]->allocated = cache_up[g][p];
      stats[g]->freed = cache_down[g][p];
      for (const CounterShard& s : shards_) {
        stats[g]->allocated += s.gauge_up[g][p].load(std::memory_order_relaxed);
        stats[g]->freed += s.gauge_down[g][p].load(std::memory_order_relaxed);
      }
    }
  }
  int64_t counters[kNumCounters] = {};
  for (int c = 0; c < kNumCounters; ++c) counters[c] = cache_counters[c];
  for (const CounterShard& s : shards_) {
    for (int c = 0; c < kNumCounters; ++c) {
      counters[c] += s.counters[c].load(std::memory_order_relaxed);
    }
  }
  out.num_allocations = counters[kNumAllocations];
  out.num_frees = counters[kNumFrees];
  out.num_cache_hits = counters[kNumCacheHits];
  out.num_cache_misses = counters[kNumCacheMisses];
  out.num_ooms = counters[kNumOoms];
  out.num_alloc_retries = counters[kNumAllocRetries];
  out.num_segment_allocs = counters[kNumSegmentAllocs];
  out.num_segment_frees = counters[kNumSegmentFrees];
  out.num_maps = counters[kNumMaps];
  out.num_unmaps = counters[kNumUnmaps];
  out.num_segments = num_segments_.load(std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mu_);
  out.largest_free_block = LargestFreeBlockLocked();
  return out;
}

void CachingAllocator::Impl::ResetPeakStats() {
  {
    std::lock_guard<std::mutex> registry_lock(registry_->mu);
    AllCachesLock caches_lock(registry_->caches);
    for (const auto& cache : registry_->caches) FoldCacheStats(*cache);
  }
  for (int g = 0; g < kNumGauges; ++g) {
    for (int p = 0; p < kNumStatPools; ++p) {
      peak_[g][p].store(cur_[g][p].load(std::memory_order_relaxed),
                        std::memory_order_relaxed);
    }
  }
}

void CachingAllocator::Impl::ResetAccumulatedStats() {
  {
    std::lock_guard<std::mutex> registry_lock(registry_->mu);
    AllCachesLock caches_lock(registry_->caches);
    for (const auto& cache : registry_->caches) FoldCacheStats(*cache);
  }
  for (CounterShard& s : shards_) {
    for (auto& c : s.counters) c.store(0, std::memory_order_relaxed);
    for (int g = 0; g < kNumGauges; ++g) {
      for (int p = 0; p < kNumStatPools; ++p) {
        s.gauge_up[g][p].store(0, std::memory_order_relaxed);
        s.gauge_down[g][p].store(0, std::memory_order_relaxed);
      }
    }
  }
}

int64_t CachingAllocator::Impl::LargestFreeBlockLocked() const {
  // The last block of each stream's run in a free set is that stream's largest.
  int64_t largest = 0;
  for (int pool : {kSmall, kLarge}) {
    const auto& set = free_[pool];
    for (auto it = set.begin(); it != set.end();) {
      auto end = set.upper_bound(FreeKey{(*it)->stream, kNoLimit, nullptr});
      largest = std::max<int64_t>(largest, static_cast<int64_t>((*std::prev(end))->size));
      it = end;
    }
  }
  return largest;
}

// ----- Thread caches -----

ThreadCache* CachingAllocator::Impl::MyCacheSlow() {
  TlsCaches& tls = Tls();
  for (TlsEntry& e : tls.entries) {
    if (e.pool_id == id_) {
      tls_pool_id = id_;
      tls_pool_cache = e.cache.get();
      return tls_pool_cache;
    }
  }
  // First use of this pool on this thread; drop entries of pools that are gone.
  std::erase_if(tls.entries, [](const TlsEntry& e) {
    std::lock_guard<std::mutex> lock(e.registry->mu);
    return e.registry->owner == nullptr;
  });
  auto cache = std::make_shared<ThreadCache>();
  {
    std::lock_guard<std::mutex> lock(registry_->mu);
    registry_->caches.push_back(cache);
  }
  tls.entries.push_back(TlsEntry{id_, registry_, cache});
  tls_pool_id = id_;
  tls_pool_cache = cache.get();
  return tls_pool_cache;
}

inline char* CachingAllocator::Impl::CachePop(ThreadCache& cache_ref, size_t size,
                                             StreamId stream, size_t requested) {
  ThreadCache* cache = &cache_ref;
  OwnerLock::AsOwner lock(cache->mu);
  ThreadCache::BinVector* bin = cache->Bin(size, stream, /*create=*/false);
  if (bin == nullptr || bin->empty()) return nullptr;
  const ThreadCache::Cached c = bin->back();
  bin->pop_back();
  // The bin's key is the block's size.
  cache->AddBytes(-static_cast<int64_t>(size));
  Block* b = c.block;
  b->requested.store(requested, std::memory_order_relaxed);
  // Only the thread that holds a block's bin hands it out, so a plain increment will do.
  const uint64_t seq = c.seq + 1;
  b->alloc_seq.store(seq, std::memory_order_relaxed);
  b->state.store(State::kAllocated, std::memory_order_relaxed);
  cache->handed_out[ThreadCache::SlotFor(c.ptr)] = {c.ptr, b, seq};
  cache->Account</*kTaken=*/true>(c.pool, static_cast<int64_t>(size),
                                  static_cast<int64_t>(requested), c.split);
  return c.ptr;
}

void CachingAllocator::Impl::FoldCurrent(ThreadCache& cache) {
  for (int p = 0; p < kNumStatPools; ++p) {
    ThreadCache::Unfolded& u = cache.unfolded[p];
    for (int g = 0; g < kNumGauges; ++g) {
      const auto gauge = static_cast<Gauge>(g);
      if (const int64_t high = u.High(gauge); high > 0) {
        RaisePeakTo(gauge, p, GaugeNow(gauge, p) + high);
      }
      if (const int64_t change = u.Change(gauge); change != 0) {
        cur_[g][p].fetch_add(change, std::memory_order_relaxed);
      }
    }
    u = {};
  }
}

void CachingAllocator::Impl::FoldCacheStats(ThreadCache& cache) {
  FoldCurrent(cache);
  int64_t up[kNumGauges][kNumStatPools] = {};
  int64_t down[kNumGauges][kNumStatPools] = {};
  int64_t counters[kNumCounters] = {};
  cache.AddTotals(up, down, counters);
  for (ThreadCache::Totals& t : cache.totals) t = {};
  CounterShard& shard = shards_[ThisThreadShard()];
  for (int g = 0; g < kNumGauges; ++g) {
    for (int p = 0; p < kNumStatPools; ++p) {
      if (up[g][p] != 0) shard.gauge_up[g][p].fetch_add(up[g][p], std::memory_order_relaxed);
      if (down[g][p] != 0) shard.gauge_down[g][p].fetch_add(down[g][p], std::memory_order_relaxed);
    }
  }
  for (int c = 0; c < kNumCounters; ++c) {
    if (counters[c] != 0) shard.counters[c].fetch_add(counters[c], std::memory_order_relaxed);
  }
}

void CachingAllocator::Impl::FoldMyCurrent() {
  ThreadCache* cache = MyCache();
  OwnerLock::AsOwner lock(cache->mu);
  FoldCurrent(*cache);
}

bool CachingAllocator::Impl::CachePush(Block* b, size_t requested) {
  ThreadCache* cache = MyCache();
  OwnerLock::AsOwner lock(cache->mu);
  return CachePushLocked(*cache, b, requested, b->alloc_seq.load(std::memory_order_relaxed));
}

inline bool CachingAllocator::Impl::FreeToOwnCache(ThreadCache& cache_ref, const void* ptr,
                                                  FastFreed* freed) {
  ThreadCache* cache = &cache_ref;
  OwnerLock::AsOwner lock(cache->mu);
  ThreadCache::HandedOut& slot = cache->handed_out[ThreadCache::SlotFor(ptr)];
  if (slot.ptr != ptr) return false;
  Block* b = slot.block;
  const uint64_t seq = slot.seq;
  slot = {};
  // Still the allocation this thread handed out? Otherwise (freed elsewhere, handed out
  // again, merged away) the ordinary path decides.
  if (b->alloc_seq.load(std::memory_order_relaxed) != seq ||
      b->state.load(std::memory_order_relaxed) != State::kAllocated ||
      b->has_recorded_streams.load(std::memory_order_relaxed)) {
    return false;
  }
  const size_t requested = b->requested.load(std::memory_order_relaxed);
  if (freed != nullptr) *freed = {b->size, requested, b->stream};
  return CachePushLocked(*cache, b, requested, seq);
}

inline bool CachingAllocator::Impl::CachePushLocked(ThreadCache& cache, Block* b,
                                                    size_t requested, uint64_t seq) {
  const int pool = b->pool;
  const size_t size = b->size;
  if (pool != kSmall && !large_blocks_in_thread_caches_) return false;
  if (cache.bytes.load(std::memory_order_relaxed) + size > opt_.thread_cache_bytes) {
    return false;
  }
  ThreadCache::BinVector& bin = *cache.Bin(size, b->stream, /*create=*/true);
  if (bin.size() >= static_cast<size_t>(opt_.thread_cache_blocks)) return false;
  bin.push_back({b, b->ptr, seq, pool, b->split});
  cache.AddBytes(static_cast<int64_t>(size));
  b->state.store(State::kThreadCached, std::memory_order_relaxed);
  b->requested.store(0, std::memory_order_relaxed);
  // A cached block that does not span its segment keeps the segment split.
  cache.Account</*kTaken=*/false>(pool, static_cast<int64_t>(size),
                                  static_cast<int64_t>(requested), b->split);
  return true;
}

void CachingAllocator::Impl::TakeCachedBlocks(ThreadCache& cache, std::vector<Block*>* blocks) {
  for (auto& [key, bin] : cache.bins) {
    for (const ThreadCache::Cached& c : bin) blocks->push_back(c.block);
    bin.clear();
  }
  cache.bytes.store(0, std::memory_order_relaxed);
  FoldCacheStats(cache);
}

void CachingAllocator::Impl::FlushThreadCaches() {
  std::lock_guard<std::mutex> registry_lock(registry_->mu);
  std::vector<Block*> blocks;
  {
    AllCachesLock caches_lock(registry_->caches);
    for (const auto& cache : registry_->caches) TakeCachedBlocks(*cache, &blocks);
  }
  if (blocks.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  ReturnCachedBlocksLocked(blocks);
}

bool CachingAllocator::Impl::FlushMyCache() {
  ThreadCache* cache = MyCache();
  std::vector<Block*> blocks;
  {
    OwnerLock::AsOwner lock(cache->mu);
    if (cache->bytes.load(std::memory_order_relaxed) == 0) return false;
    TakeCachedBlocks(*cache, &blocks);
  }
  std::lock_guard<std::mutex> lock(mu_);
  ReturnCachedBlocksLocked(blocks);
  return true;
}

void CachingAllocator::Impl::AdoptExitingThreadCache(
    const std::shared_ptr<ThreadCache>& cache) {
  std::erase(registry_->caches, cache);
  std::vector<Block*> blocks;
  {
    // Called on the exiting thread itself, the cache's owner.
    OwnerLock::AsOwner lock(cache->mu);
    TakeCachedBlocks(*cache, &blocks);
    cache->bins.clear();
    for (ThreadCache::RecentBin& r : cache->recent) r = {};
  }
  std::lock_guard<std::mutex> lock(mu_);
  ReturnCachedBlocksLocked(blocks);
}

void CachingAllocator::Impl::ReturnCachedBlocksLocked(const std::vector<Block*>& blocks) {
  for (Block* b : blocks) {
    Unregister(b);
    if (IsSplit(b)) AddGauge(kInactiveSplitBytes, b->pool, -static_cast<int64_t>(b->size));
    FreeAndMergeLocked(b);
  }
}

// ----- Free sets -----

void CachingAllocator::Impl::InsertFreeLocked(Block* b) {
  b->state.store(State::kFree, std::memory_order_relaxed);
  free_[b->pool].insert(b);
  if (IsSplit(b)) {
    AddGauge(kInactiveSplitBytes, b->pool, static_cast<int64_t>(b->size));
  } else {
    fully_free_.insert(b->segment);
  }
}

void CachingAllocator::Impl::EraseFreeLocked(Block* b) {
  free_[b->pool].erase(b);
  if (IsSplit(b)) {
    AddGauge(kInactiveSplitBytes, b->pool, -static_cast<int64_t>(b->size));
  } else {
    fully_free_.erase(b->segment);
  }
}

Block* CachingAllocator::Impl::NewBlockLocked() {
  if (spare_blocks_.empty()) return new Block;
  Block* b = spare_blocks_.back();
  spare_blocks_.pop_back();
  return b;
}

void CachingAllocator::Impl::RecycleBlockLocked(Block* b) {
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
  b->has_recorded_streams.store(false, std::memory_order_relaxed);
  b->pending_events = 0;
  spare_blocks_.push_back(b);
}

Block* CachingAllocator::Impl::FreeAndMergeLocked(Block* b) {
  if (Block* prev = b->prev;
      prev != nullptr && prev->state.load(std::memory_order_relaxed) == State::kFree) {
    EraseFreeLocked(prev);
    prev->size += b->size;
    prev->next = b->next;
    if (b->next != nullptr) b->next->prev = prev;
    RecycleBlockLocked(b);
    b = prev;
  }
  if (Block* next = b->next;
      next != nullptr && next->state.load(std::memory_order_relaxed) == State::kFree) {
    EraseFreeLocked(next);
    b->size += next->size;
    b->next = next->next;
    if (next->next != nullptr) next->next->prev = b;
    RecycleBlockLocked(next);
  }
  InsertFreeLocked(b);
  b->segment->last_used = ++tick_;
  return b;
}

Block* CachingAllocator::Impl::FindFreeLocked(int pool, StreamId stream, size_t size) {
  auto& set = free_[pool];
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

void CachingAllocator::Impl::TakeBlockLocked(Block* b, size_t size, size_t requested) {
  EraseFreeLocked(b);
  const size_t remaining = b->size - size;
  // Large blocks keep small remainders (they would only fragment the large pool),
  // except in expandable segments, where the remainder shares mapped chunks with its
  // neighbours anyway and merges with the next mapping.
  const bool split = b->pool == kSmall || b->segment->expandable
                         ? remaining >= opt_.block_rounding
                         : remaining > opt_.small_size_limit &&
                               b->size <= opt_.max_split_size;
  if (split) InsertFreeLocked(SplitLocked(b, size));
  b->alloc_seq.store(b->alloc_seq.load(std::memory_order_relaxed) + 1,
                     std::memory_order_relaxed);
  b->state.store(State::kAllocated, std::memory_order_relaxed);
  b->requested.store(requested, std::memory_order_relaxed);
  b->split = IsSplit(b);
  b->segment->last_used = ++tick_;
  const int64_t s = static_cast<int64_t>(b->size);
  AddGauge(kAllocatedBytes, b->pool, s);
  AddGauge(kCachedBytes, b->pool, -s);
  AddGauge(kActiveBytes, b->pool, s);
  AddGauge(kRequestedBytes, b->pool, static_cast<int64_t>(requested));
  Count(kNumAllocations);
}

Block* CachingAllocator::Impl::SplitLocked(Block* b, size_t offset) {
  Block* rest = NewBlockLocked();
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

// ----- Segments -----

absl::StatusOr<Block*> CachingAllocator::Impl::NewSegmentLocked(size_t segment_size,
                                                                int pool,
                                                                StreamId stream,
                                                                Sink* sink,
                                                                OomReason* why) {
  // Classic segments: beyond the reserved high-water mark, fully free segments (least
  // recently used first) go back before the backend is asked for more, so that peak
  // reserved memory follows peak allocated memory instead of keeping segments no
  // request fits; below it (a loop that has warmed up) nothing is released. (Expandable
  // segments do the same with chunks in ExpandLocked.)
  if (!expandable() &&
      static_cast<int64_t>(segment_size) + GaugeNow(kReservedBytes, kAllPools) >
          reserved_high_water_) {
    ReleaseFreeSegmentsLocked(
        [&] {
          return GaugeNow(kReservedBytes, kAllPools) + static_cast<int64_t>(segment_size) <=
                 reserved_high_water_;
        },
        sink);
  }
  const size_t reserved = static_cast<size_t>(GaugeNow(kReservedBytes, kAllPools));
  if (allowed_max_ != kNoLimit &&
      (segment_size > allowed_max_ || reserved > allowed_max_ - segment_size)) {
    why->limit_hit = true;
    return absl::ResourceExhaustedError("memory_fraction limit");
  }
  absl::StatusOr<void*> ptr = backend_->AllocateSegment(segment_size);
  if (!ptr.ok()) {
    if (absl::IsResourceExhausted(ptr.status())) {
      why->limit_hit = false;
      why->backend_message = std::string(ptr.status().message());
      return ptr.status();
    }
    return Annotate(ptr.status(), absl::StrCat("allocating a segment of ", segment_size,
                                               " bytes from ",
                                               ToAbsl(backend_->name())));
  }
  auto* s = new Segment;
  s->ptr = static_cast<char*>(*ptr);
  s->size = segment_size;
  s->stream = stream;
  s->pool = pool;
  Block* b = NewBlockLocked();
  b->ptr = s->ptr;
  b->size = segment_size;
  b->stream = stream;
  b->pool = pool;
  b->segment = s;
  s->head = b;
  segments_[reinterpret_cast<uintptr_t>(s->ptr)] = s;
  AddGauge(kReservedBytes, pool, static_cast<int64_t>(segment_size));
  AddGauge(kCachedBytes, pool, static_cast<int64_t>(segment_size));
  num_segments_.fetch_add(1, std::memory_order_relaxed);
  reserved_high_water_ =
      std::max(reserved_high_water_, GaugeNow(kReservedBytes, kAllPools));
  Count(kNumSegmentAllocs);
  ++segment_size_count_[segment_size];
  InsertFreeLocked(b);
  if (sink != nullptr) {
    sink->push_back(
        MakeEvent(AllocatorEventType::kSegmentAlloc, segment_size, 0, s->ptr, stream));
    sink->back().small_pool = pool == kSmall;
  }
  return b;
}

void CachingAllocator::Impl::ReleaseSegmentLocked(Segment* s, Sink* sink) {
  Block* b = s->head;
  EraseFreeLocked(b);
  segments_.erase(reinterpret_cast<uintptr_t>(s->ptr));
  backend_->FreeSegment(s->ptr, s->size);
  AddGauge(kReservedBytes, s->pool, -static_cast<int64_t>(s->size));
  AddGauge(kCachedBytes, s->pool, -static_cast<int64_t>(s->size));
  num_segments_.fetch_sub(1, std::memory_order_relaxed);
  Count(kNumSegmentFrees);
  if (sink != nullptr) {
    sink->push_back(
        MakeEvent(AllocatorEventType::kSegmentFree, s->size, 0, s->ptr, s->stream));
    sink->back().small_pool = s->pool == kSmall;
  }
  RecycleBlockLocked(b);
  delete s;
}

void CachingAllocator::Impl::ReleaseFreeSegmentsLocked(const std::function<bool()>& done,
                                                       Sink* sink) {
  if (done()) return;
  if (expandable()) {
    UnmapIdleChunksLocked(kNoLimit, done, {}, /*under_pressure=*/false, sink);
    if (!done()) ReleaseEmptyReservationsLocked();
  }
  if (fully_free_.empty()) return;
  std::vector<Segment*> order(fully_free_.begin(), fully_free_.end());
  auto recurring = [this](const Segment* s) {
    if (!opt_.adaptive_caching) return 0;
    auto it = segment_size_count_.find(s->size);
    return it != segment_size_count_.end() && it->second >= 2 ? 1 : 0;
  };
  std::sort(order.begin(), order.end(), [&](const Segment* a, const Segment* b) {
    return std::make_tuple(recurring(a), a->last_used) <
           std::make_tuple(recurring(b), b->last_used);
  });
  for (Segment* s : order) {
    if (done()) break;
    ReleaseSegmentLocked(s, sink);
  }
}

void CachingAllocator::Impl::EnforceCacheLimitLocked(Sink* sink) {
  if (opt_.cache_limit == kNoLimit) return;
  ReleaseFreeSegmentsLocked(
      [this] {
        return GaugeNow(kCachedBytes, kAllPools) <= static_cast<int64_t>(opt_.cache_limit);
      },
      sink);
}

void CachingAllocator::Impl::CollectGarbageLocked(size_t segment_size, Sink* sink) {
  if (opt_.garbage_collection_threshold <= 0.0 || total_bytes_ == 0) return;
  const double allowed = opt_.memory_fraction * static_cast<double>(total_bytes_);
  const double threshold = opt_.garbage_collection_threshold * allowed;
  ReleaseFreeSegmentsLocked(
      [&] {
        return static_cast<double>(GaugeNow(kReservedBytes, kAllPools)) +
                   static_cast<double>(segment_size) <=
               threshold;
      },
      sink);
}

// ----- Expandable segments -----

absl::StatusOr<Segment*> CachingAllocator::Impl::NewReservationLocked(size_t min_bytes,
                                                                      StreamId stream,
                                                                      Sink* sink) {
  size_t needed = 0;
  if (!RoundUp(min_bytes, chunk_, &needed)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Allocate: size ", min_bytes, " overflows when rounded up to chunks of ", chunk_,
        " bytes"));
  }
  // A full-size range if the address space has room, else one just large enough.
  size_t bytes = std::max(needed, reservation_);
  absl::StatusOr<void*> base = vm_->Reserve(bytes);
  if (!base.ok() && bytes > needed) {
    bytes = needed;
    base = vm_->Reserve(bytes);
  }
  if (!base.ok()) {
    return Annotate(base.status(), absl::StrCat("reserving ", bytes,
                                                " bytes of address space from ",
                                                ToAbsl(backend_->name())));
  }
  auto* s = new Segment;
  s->ptr = static_cast<char*>(*base);
  s->size = bytes;
  s->stream = stream;
  s->pool = kLarge;
  s->expandable = true;
  Block* u = NewBlockLocked();
  u->ptr = s->ptr;
  u->size = bytes;
  u->stream = stream;
  u->pool = kLarge;
  u->segment = s;
  s->head = u;
  segments_[reinterpret_cast<uintptr_t>(s->ptr)] = s;
  num_segments_.fetch_add(1, std::memory_order_relaxed);
  Count(kNumSegmentAllocs);
  InsertUnmappedLocked(u);
  return s;
}

void CachingAllocator::Impl::InsertUnmappedLocked(Block* u) {
  u->state.store(State::kUnmapped, std::memory_order_relaxed);
  if (Block* prev = u->prev;
      prev != nullptr && prev->state.load(std::memory_order_relaxed) == State::kUnmapped) {
    unmapped_.erase(prev);
    prev->size += u->size;
    prev->next = u->next;
    if (u->next != nullptr) u->next->prev = prev;
    RecycleBlockLocked(u);
    u = prev;
  }
  if (Block* next = u->next;
      next != nullptr && next->state.load(std::memory_order_relaxed) == State::kUnmapped) {
    unmapped_.erase(next);
    u->size += next->size;
    u->next = next->next;
    if (next->next != nullptr) next->next->prev = u;
    RecycleBlockLocked(next);
  }
  unmapped_.insert(u);
}

absl::StatusOr<Block*> CachingAllocator::Impl::MapLocked(Block* u, char* begin, char* end,
                                                         Sink* sink) {
  const size_t bytes = static_cast<size_t>(end - begin);
  GENESIS_RETURN_IF_ERROR(
      vm_->MapPieces(begin, bytes, std::max(opt_.expandable_piece_size, chunk_)));
  unmapped_.erase(u);
  Block* mapped = u;
  if (begin > u->ptr) {
    mapped = SplitLocked(u, static_cast<size_t>(begin - u->ptr));
    unmapped_.insert(u);
  }
  if (end < mapped->ptr + mapped->size) {
    unmapped_.insert(SplitLocked(mapped, bytes));
  }
  AddGauge(kReservedBytes, kLarge, static_cast<int64_t>(bytes));
  AddGauge(kCachedBytes, kLarge, static_cast<int64_t>(bytes));
  reserved_high_water_ =
      std::max(reserved_high_water_, GaugeNow(kReservedBytes, kAllPools));
  Count(kNumMaps);
  if (sink != nullptr) {
    sink->push_back(
        MakeEvent(AllocatorEventType::kSegmentMap, bytes, 0, begin, mapped->stream));
  }
  return FreeAndMergeLocked(mapped);
}

size_t CachingAllocator::Impl::UnmapInteriorLocked(Block* b, size_t max_bytes,
                                                   bool under_pressure, Sink* sink) {
  const auto start = reinterpret_cast<uintptr_t>(b->ptr);
  const uintptr_t end = start + b->size;
  uintptr_t lo = (start + chunk_ - 1) / chunk_ * chunk_;
  uintptr_t hi = end / chunk_ * chunk_;
  if (hi <= lo || max_bytes == 0) return 0;
  // Memory goes back a whole piece at a time: drop the pieces that stick out of the
  // block (they hold neighbours' bytes too), and of the rest the whole pieces within
  // the last `max_bytes` (rounded up to chunks). Unmapping less than asked, never more,
  // keeps a loop from unmapping memory that it maps again later in the same step: the
  // high-water mark then rises by less than a piece, once.
  if (const auto [first, last] = vm_->PieceAt(lo); first < lo) lo = last;
  if (hi <= lo) return 0;
  if (const auto [first, last] = vm_->PieceAt(hi - 1); last > hi) hi = first;
  if (hi <= lo) return 0;
  if (hi - lo > max_bytes) {
    const size_t want = (max_bytes + chunk_ - 1) / chunk_ * chunk_;
    if (want < hi - lo) {
      const auto [first, last] = vm_->PieceAt(hi - want);
      lo = first < hi - want ? last : first;
      if (hi <= lo) return 0;
    }
  }
  const size_t bytes = hi - lo;
  // On failure the chunks stay mapped, and the pool keeps using them.
  if (!vm_->Unmap(reinterpret_cast<void*>(lo), bytes).ok()) return 0;
  if (under_pressure) {
    if (pressure_unmapped_.size() == kPressureMemory) pressure_unmapped_.pop_front();
    pressure_unmapped_.emplace_back(lo, hi);
  }
  EraseFreeLocked(b);
  Block* middle = b;
  if (lo > start) {
    middle = SplitLocked(b, lo - start);
    InsertFreeLocked(b);
  }
  if (hi < end) InsertFreeLocked(SplitLocked(middle, bytes));
  AddGauge(kReservedBytes, kLarge, -static_cast<int64_t>(bytes));
  AddGauge(kCachedBytes, kLarge, -static_cast<int64_t>(bytes));
  Count(kNumUnmaps);
  if (sink != nullptr) {
    sink->push_back(MakeEvent(AllocatorEventType::kSegmentUnmap, bytes, 0, middle->ptr,
                              middle->stream));
  }
  InsertUnmappedLocked(middle);
  return bytes;
}

size_t CachingAllocator::Impl::UnmapIdleChunksLocked(size_t bytes,
                                                     const std::function<bool()>& done,
                                                     std::initializer_list<const Block*> keep,
                                                     bool under_pressure, Sink* sink) {
  std::vector<Block*> candidates;
  for (Block* b : free_[kLarge]) {
    if (b->segment->expandable && b->size >= chunk_ &&
        std::find(keep.begin(), keep.end(), b) == keep.end()) {
      candidates.push_back(b);
    }
  }
  // The largest free blocks first: the fewest calls for the most memory.
  std::sort(candidates.begin(), candidates.end(),
            [](const Block* a, const Block* b) { return a->size > b->size; });
  size_t unmapped = 0;
  for (Block* b : candidates) {
    if (unmapped >= bytes || done()) break;
    unmapped += UnmapInteriorLocked(b, bytes - unmapped, under_pressure, sink);
  }
  return unmapped;
}

absl::StatusOr<Block*> CachingAllocator::Impl::ExpandLocked(size_t size, StreamId stream,
                                                            Sink* sink, OomReason* why) {
  auto free_mapped = [](Block* b) {
    return b != nullptr && b->state.load(std::memory_order_relaxed) == State::kFree
               ? b
               : nullptr;
  };
  auto chunks = [this](size_t n) { return (n + chunk_ - 1) / chunk_ * chunk_; };
  // The unmapped range to map: grow the free block before an unmapped block forward,
  // or the one after it backward, whichever maps less; of all candidates, the one
  // that maps least (then the smallest unmapped block, then the lowest address).
  Block* u = nullptr;
  Block* u_prev = nullptr;
  Block* u_next = nullptr;
  char* begin = nullptr;
  char* end = nullptr;
  size_t best = kNoLimit;
  for (auto it = unmapped_.lower_bound(FreeKey{stream, 0, nullptr});
       it != unmapped_.end() && (*it)->stream == stream; ++it) {
    Block* c = *it;
    Block* prev = free_mapped(c->prev);
    Block* next = free_mapped(c->next);
    const size_t p = prev != nullptr ? prev->size : 0;
    const size_t n = next != nullptr ? next->size : 0;
    if (size > p + c->size + n) continue;
    const size_t forward = size > p ? std::min(chunks(size - p), c->size) : 0;
    const size_t backward = size > n ? std::min(chunks(size - n), c->size) : 0;
    const size_t bytes = std::min(forward, backward);
    if (bytes >= best) continue;
    best = bytes;
    u = c;
    u_prev = prev;
    u_next = next;
    begin = forward <= backward ? c->ptr : c->ptr + c->size - backward;
    end = begin + bytes;
  }
  if (u == nullptr) {
    absl::StatusOr<Segment*> s = NewReservationLocked(size, stream, sink);
    if (!s.ok()) {
      why->limit_hit = false;
      why->backend_message = std::string(s.status().message());
      return s.status();
    }
    u = (*s)->head;
    begin = u->ptr;
    end = begin + chunks(size);
  }
  const auto bytes = static_cast<int64_t>(end - begin);
  // Below the high-water mark the pool maps new memory; beyond it (or beyond the
  // memory_fraction cap) it first moves idle memory here, so the peak stays put.
  for (auto it = pressure_unmapped_.begin(); it != pressure_unmapped_.end(); ++it) {
    if (it->first < reinterpret_cast<uintptr_t>(end) &&
        reinterpret_cast<uintptr_t>(begin) < it->second) {
      reserved_high_water_ = std::max(reserved_high_water_,
                                      GaugeNow(kReservedBytes, kAllPools) + bytes);
      pressure_unmapped_.erase(it);
      break;
    }
  }
  int64_t over = GaugeNow(kReservedBytes, kAllPools) + bytes - reserved_high_water_;
  if (allowed_max_ != kNoLimit) {
    over = std::max(over, GaugeNow(kReservedBytes, kAllPools) + bytes -
                              static_cast<int64_t>(allowed_max_));
  }
  if (over > 0) {
    UnmapIdleChunksLocked(static_cast<size_t>(over), [] { return false; },
                          {u, u_prev, u_next}, /*under_pressure=*/true, sink);
  }
  if (allowed_max_ != kNoLimit &&
      GaugeNow(kReservedBytes, kAllPools) + bytes > static_cast<int64_t>(allowed_max_)) {
    why->limit_hit = true;
    return absl::ResourceExhaustedError("memory_fraction limit");
  }
  absl::StatusOr<Block*> b = MapLocked(u, begin, end, sink);
  if (!b.ok()) {
    if (absl::IsResourceExhausted(b.status())) {
      why->limit_hit = false;
      why->backend_message = std::string(b.status().message());
      return b.status();
    }
    return Annotate(b.status(), absl::StrCat("mapping ", bytes, " bytes of ",
                                             ToAbsl(backend_->name())));
  }
  return b;
}

void CachingAllocator::Impl::ReleaseEmptyReservationsLocked() {
  for (auto it = segments_.begin(); it != segments_.end();) {
    Segment* s = it->second;
    Block* head = s->head;
    if (!s->expandable || head->next != nullptr ||
        head->state.load(std::memory_order_relaxed) != State::kUnmapped) {
      ++it;
      continue;
    }
    unmapped_.erase(head);
    vm_->Unreserve(s->ptr, s->size);
    RecycleBlockLocked(head);
    num_segments_.fetch_sub(1, std::memory_order_relaxed);
    Count(kNumSegmentFrees);
    it = segments_.erase(it);
    delete s;
  }
}

void CachingAllocator::Impl::DestroyExpandableSegmentLocked(Segment* s) {
  // Unmapped blocks are chunk-aligned, so each run of other blocks is too.
  char* run = nullptr;
  for (Block* b = s->head; b != nullptr; b = b->next) {
    const bool mapped = b->state.load(std::memory_order_relaxed) != State::kUnmapped;
    if (mapped && run == nullptr) run = b->ptr;
    if (run != nullptr && (!mapped || b->next == nullptr)) {
      char* run_end = mapped ? b->ptr + b->size : b->ptr;
      (void)vm_->Unmap(run, static_cast<size_t>(run_end - run));
      run = nullptr;
    }
  }
  vm_->Unreserve(s->ptr, s->size);
}

absl::StatusOr<Block*> CachingAllocator::Impl::NewSpaceLocked(size_t size,
                                                              size_t segment_size,
                                                              int pool, StreamId stream,
                                                              Sink* sink, OomReason* why) {
  if (pool == kLarge && expandable()) return ExpandLocked(size, stream, sink, why);
  return NewSegmentLocked(segment_size, pool, stream, sink, why);
}

// ----- Stream events -----

absl::Status CachingAllocator::Impl::ProcessEventsLocked(bool wait) {
  if (pending_.empty()) return absl::OkStatus();
  absl::Status status;
  std::vector<std::pair<EventId, Block*>> still;
  for (auto& [event, block] : pending_) {
    bool done = false;
    if (status.ok()) {
      if (wait) {
        status = events_->Synchronize(event);
        done = status.ok();
      } else {
        absl::StatusOr<bool> q = events_->Query(event);
        if (q.ok()) {
          done = *q;
        } else {
          status = q.status();
        }
      }
    }
    if (!done) {
      still.push_back({event, block});
      continue;
    }
    events_->Release(event);
    if (--block->pending_events == 0) {
      AddGauge(kActiveBytes, block->pool, -static_cast<int64_t>(block->size));
      FreeAndMergeLocked(block);
    }
  }
  pending_ = std::move(still);
  return status;
}

// ----- Allocate -----

absl::StatusOr<Block*> CachingAllocator::Impl::AllocateLocked(
    size_t size, size_t requested, size_t segment_size, int pool, StreamId stream,
    bool may_grow, Sink* sink, OomReason* why, bool* hit) {
  GENESIS_RETURN_IF_ERROR(ProcessEventsLocked(/*wait=*/false));
  if (Block* b = FindFreeLocked(pool, stream, size)) {
    TakeBlockLocked(b, size, requested);
    *hit = true;
    return b;
  }
  if (!may_grow) return nullptr;
  CollectGarbageLocked(segment_size, sink);
  GENESIS_ASSIGN_OR_RETURN(Block * b,
                           NewSpaceLocked(size, segment_size, pool, stream, sink, why));
  TakeBlockLocked(b, size, requested);
  *hit = false;
  return b;
}

absl::StatusOr<Block*> CachingAllocator::Impl::AllocateAfterOomLocked(
    size_t size, size_t requested, size_t segment_size, int pool, StreamId stream,
    Sink* sink, OomReason* why, bool* hit) {
  // A block that only waits for an event is better than an OOM: wait for it.
  GENESIS_RETURN_IF_ERROR(ProcessEventsLocked(/*wait=*/true));
  if (Block* b = FindFreeLocked(pool, stream, size)) {
    TakeBlockLocked(b, size, requested);
    *hit = true;
    return b;
  }
  ReleaseFreeSegmentsLocked([] { return false; }, sink);
  Count(kNumAllocRetries);
  absl::StatusOr<Block*> b = NewSpaceLocked(size, segment_size, pool, stream, sink, why);
  if (b.ok()) {
    TakeBlockLocked(*b, size, requested);
    *hit = false;
    return b;
  }
  if (!absl::IsResourceExhausted(b.status())) return b.status();
  Count(kNumOoms);
  if (sink != nullptr) {
    sink->push_back(
        MakeEvent(AllocatorEventType::kOom, size, requested, nullptr, stream));
    sink->back().small_pool = pool == kSmall;
  }
  // What the backend was asked for: a segment, or chunks to map.
  const size_t needed = pool == kLarge && expandable()
                            ? (size + chunk_ - 1) / chunk_ * chunk_
                            : segment_size;
  return absl::ResourceExhaustedError(OomMessageLocked(requested, size, needed, *why));
}

void CachingAllocator::Impl::Register(Block* b) {
  MapShard& shard = ShardFor(b->ptr);
  std::lock_guard<SpinLock> lock(shard.mu);
  shard.blocks[b->ptr] = b;
}

void CachingAllocator::Impl::Unregister(Block* b) {
  MapShard& shard = ShardFor(b->ptr);
  std::lock_guard<SpinLock> lock(shard.mu);
  shard.blocks.erase(b->ptr);
}

absl::StatusOr<void*> CachingAllocator::Impl::AllocateSlow(size_t bytes, StreamId stream,
                                                           bool cache_tried) {
  GENESIS_ASSIGN_OR_RETURN(const size_t size, RoundSize(bytes));
  const int pool = size < opt_.small_size_limit ? kSmall : kLarge;
  const bool watch = observed();
  const int64_t start_ns = watch ? NowNs() : 0;

  if (thread_caches_ && !cache_tried) {
    if (char* p = CachePop(size, stream, bytes)) {
      if (watch) {
        AllocatorEvent e = MakeEvent(AllocatorEventType::kAllocate, size, bytes, p, stream,
                                     /*cache_hit=*/true, start_ns);
        e.small_pool = pool == kSmall;
        Dispatch({e});
      }
      return static_cast<void*>(p);
    }
  }

  GENESIS_ASSIGN_OR_RETURN(const size_t segment_size, SegmentSize(size, pool));
  if (thread_caches_) FoldMyCurrent();
  Sink events;
  Sink* sink = watch ? &events : nullptr;
  OomReason why;
  bool hit = false;
  absl::StatusOr<Block*> block;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Memory in a thread cache is reserved but serves only its own size: before an
    // expandable segment maps more for this thread, the pool takes back what this
    // thread's cache holds, where it merges with its neighbours and can be unmapped.
    // (Only this thread's: other threads' cached blocks are in use by them, and
    // unmapping them would make those threads map again. Classic segments do not gain
    // from it: blocks that thread caches keep for their own size fragment segments
    // less than the same blocks split for other sizes.)
    const bool may_grow = !thread_caches_ || pool != kLarge || !expandable();
    block = AllocateLocked(size, bytes, segment_size, pool, stream, may_grow, sink, &why,
                           &hit);
  }
  if (block.ok() && *block == nullptr) {
    FlushMyCache();
    std::lock_guard<std::mutex> lock(mu_);
    block = AllocateLocked(size, bytes, segment_size, pool, stream, /*may_grow=*/true, sink,
                           &why, &hit);
  }
  if (absl::IsResourceExhausted(block.status())) {
    FlushThreadCaches();
    std::lock_guard<std::mutex> lock(mu_);
    block =
        AllocateAfterOomLocked(size, bytes, segment_size, pool, stream, sink, &why, &hit);
  }
  if (block.ok()) {
    Count(hit ? kNumCacheHits : kNumCacheMisses);
    Register(*block);
    if (sink != nullptr) {
      sink->push_back(MakeEvent(AllocatorEventType::kAllocate, (*block)->size, bytes,
                                (*block)->ptr, stream, hit, start_ns));
      sink->back().small_pool = pool == kSmall;
    }
  }
  if (sink != nullptr) Dispatch(events);
  if (!block.ok()) return block.status();
  return static_cast<void*>((*block)->ptr);
}

// ----- Free -----

absl::Status CachingAllocator::Impl::BadPointer(const void* ptr, const char* what) const {
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = segments_.upper_bound(p);
  if (it != segments_.begin()) {
    const Segment* s = std::prev(it)->second;
    const auto start = reinterpret_cast<uintptr_t>(s->ptr);
    if (p < start + s->size) {
      for (const Block* b = s->head; b != nullptr; b = b->next) {
        const auto bstart = reinterpret_cast<uintptr_t>(b->ptr);
        if (p < bstart || p >= bstart + b->size) continue;
        const State state = b->state.load(std::memory_order_relaxed);
        if (p == bstart && state != State::kAllocated) {
          return absl::InvalidArgumentError(absl::StrFormat(
              "%s(%p): double free: the block of %d bytes at %p is already free", what,
              ptr, b->size, ptr));
        }
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s(%p): not the start of a live allocation: it lies %d bytes into a%s "
            "block of %d bytes at %p (an interior pointer, or a block already freed "
            "and merged with its neighbour)",
            what, ptr, p - bstart, state == State::kAllocated ? "n allocated" : " free",
            b->size, static_cast<const void*>(b->ptr)));
      }
    }
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("%s(%p): pointer was not allocated by this pool (%s)", what, ptr,
                      ToAbsl(backend_->name())));
}

absl::Status CachingAllocator::Impl::FreeLocked(Block* b, size_t requested) {
  std::vector<EventId> recorded;
  for (StreamId s : b->recorded_streams) {
    absl::StatusOr<EventId> e = events_->Record(s);
    if (!e.ok()) {
      for (EventId id : recorded) events_->Release(id);
      return Annotate(e.status(), absl::StrFormat(
                                      "Free(%p): recording an event on stream %#x",
                                      static_cast<const void*>(b->ptr), s));
    }
    recorded.push_back(*e);
  }
  b->recorded_streams.clear();
  b->has_recorded_streams.store(false, std::memory_order_relaxed);
  const int64_t size = static_cast<int64_t>(b->size);
  AddGauge(kAllocatedBytes, b->pool, -size);
  AddGauge(kCachedBytes, b->pool, size);
  AddGauge(kRequestedBytes, b->pool, -static_cast<int64_t>(requested));
  b->requested.store(0, std::memory_order_relaxed);
  Count(kNumFrees);
  if (recorded.empty()) {
    AddGauge(kActiveBytes, b->pool, -size);
    FreeAndMergeLocked(b);
  } else {
    b->state.store(State::kPending, std::memory_order_relaxed);
    b->pending_events = static_cast<int>(recorded.size());
    for (EventId id : recorded) pending_.push_back({id, b});
  }
  return absl::OkStatus();
}

absl::Status CachingAllocator::Impl::FreeSlow(void* ptr) {
  if (ptr == nullptr) return absl::OkStatus();
  // With the fast path on, Free has tried the thread's own cache already.
  if (thread_caches_ && !fast_path_ && !observed() && FreeToOwnCache(ptr)) {
    if (opt_.cache_limit != kNoLimit &&
        GaugeNow(kCachedBytes, kAllPools) > static_cast<int64_t>(opt_.cache_limit)) {
      std::lock_guard<std::mutex> lock(mu_);
      EnforceCacheLimitLocked(nullptr);
    }
    return absl::OkStatus();
  }
  Block* b = nullptr;
  bool to_thread_cache = false;
  {
    MapShard& shard = ShardFor(ptr);
    std::lock_guard<SpinLock> lock(shard.mu);
    auto it = shard.blocks.find(ptr);
    if (it != shard.blocks.end() &&
        it->second->state.load(std::memory_order_relaxed) == State::kAllocated) {
      b = it->second;
      // A block bound for a thread cache stays in the map (marked cached, so a second
      // free is caught) until it goes back to the pool: the next allocation that takes
      // it needs no map update. Anything else leaves the map now.
      to_thread_cache = thread_caches_ && b->recorded_streams.empty() &&
                        (b->pool == kSmall || large_blocks_in_thread_caches_);
      if (to_thread_cache) {
        b->state.store(State::kThreadCached, std::memory_order_relaxed);
      } else {
        shard.blocks.erase(it);
      }
    }
  }
  if (b == nullptr) return BadPointer(ptr, "Free");
  const size_t requested = b->requested.load(std::memory_order_relaxed);
  const bool watch = observed();
  Sink events;
  Sink* sink = watch ? &events : nullptr;
  const int64_t start_ns = watch ? NowNs() : 0;
  if (sink != nullptr) {
    sink->push_back(
        MakeEvent(AllocatorEventType::kFree, b->size, requested, b->ptr, b->stream));
    sink->back().small_pool = b->pool == kSmall;
  }
  if (to_thread_cache && !CachePush(b, requested)) {
    Unregister(b);  // The thread's bin is full: the block goes back to the pool.
    to_thread_cache = false;
  }
  if (to_thread_cache) {
    if (opt_.cache_limit != kNoLimit &&
        GaugeNow(kCachedBytes, kAllPools) > static_cast<int64_t>(opt_.cache_limit)) {
      std::lock_guard<std::mutex> lock(mu_);
      EnforceCacheLimitLocked(sink);
    }
  } else {
    if (thread_caches_) FoldMyCurrent();
    absl::Status status;
    {
      std::lock_guard<std::mutex> lock(mu_);
      status = FreeLocked(b, requested);
      if (status.ok()) EnforceCacheLimitLocked(sink);
    }
    if (!status.ok()) {
      b->state.store(State::kAllocated, std::memory_order_relaxed);
      Register(b);  // Still allocated: the caller may retry the free.
      return status;
    }
  }
  if (sink != nullptr) {
    events.front().duration_ns = NowNs() - start_ns;
    Dispatch(events);
  }
  return absl::OkStatus();
}

absl::Status CachingAllocator::Impl::RecordStream(void* ptr, StreamId stream) {
  {
    MapShard& shard = ShardFor(ptr);
    std::lock_guard<SpinLock> lock(shard.mu);
    auto it = shard.blocks.find(ptr);
    if (it != shard.blocks.end() &&
        it->second->state.load(std::memory_order_relaxed) == State::kAllocated) {
      Block* b = it->second;
      if (stream == b->stream) return absl::OkStatus();
      if (events_ == nullptr) {
        return absl::FailedPreconditionError(absl::StrFormat(
            "RecordStream(%p, %#x): this pool (%s) has no StreamEvents", ptr, stream,
            ToAbsl(backend_->name())));
      }
      if (std::find(b->recorded_streams.begin(), b->recorded_streams.end(), stream) ==
          b->recorded_streams.end()) {
        b->recorded_streams.push_back(stream);
        b->has_recorded_streams.store(true, std::memory_order_relaxed);
      }
      return absl::OkStatus();
    }
  }
  return BadPointer(ptr, "RecordStream");
}

size_t CachingAllocator::Impl::AllocationSize(const void* ptr) const {
  MapShard& shard = ShardFor(ptr);
  std::lock_guard<SpinLock> lock(shard.mu);
  auto it = shard.blocks.find(ptr);
  if (it == shard.blocks.end() ||
      it->second->state.load(std::memory_order_relaxed) != State::kAllocated) {
    return 0;
  }
  return it->second->size;
}

// ----- Cache management -----

absl::Status CachingAllocator::Impl::EmptyCache(bool wait) {
  FlushThreadCaches();
  Sink events;
  Sink* sink = observed() ? &events : nullptr;
  absl::Status status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    status = ProcessEventsLocked(wait);
    ReleaseFreeSegmentsLocked([] { return false; }, sink);
  }
  if (sink != nullptr) Dispatch(events);
  return status;
}

absl::Status CachingAllocator::Impl::WarmUp(absl::Span<const size_t> sizes,
                                            StreamId stream) {
  std::vector<void*> ptrs;
  absl::Status status;
  for (size_t size : sizes) {
    absl::StatusOr<void*> p = Allocate(size, stream);
    if (!p.ok()) {
      status = Annotate(p.status(), absl::StrCat("WarmUp(", size, " bytes)"));
      break;
    }
    ptrs.push_back(*p);
  }
  for (void* p : ptrs) status.Update(Free(p));
  return status;
}

// ----- Reports -----

std::vector<CachingAllocator::SegmentSnapshot> CachingAllocator::Impl::Snapshot() const {
  std::vector<SegmentSnapshot> out;
  std::lock_guard<std::mutex> lock(mu_);
  out.reserve(segments_.size());
  for (const auto& [addr, s] : segments_) {
    SegmentSnapshot seg;
    seg.address = s->ptr;
    seg.size = s->size;
    seg.stream = s->stream;
    seg.pool = s->pool == kSmall ? PoolKind::kSmall : PoolKind::kLarge;
    seg.expandable = s->expandable;
    seg.mapped_bytes = s->size;
    for (const Block* b = s->head; b != nullptr; b = b->next) {
      BlockSnapshot block;
      block.address = b->ptr;
      block.size = b->size;
      block.stream = b->stream;
      const State state = b->state.load(std::memory_order_relaxed);
      block.state = state == State::kAllocated  ? BlockState::kAllocated
                    : state == State::kPending  ? BlockState::kPendingFree
                    : state == State::kUnmapped ? BlockState::kUnmapped
                                                : BlockState::kFree;
      if (state == State::kUnmapped) seg.mapped_bytes -= b->size;
      block.in_thread_cache = state == State::kThreadCached;
      block.requested =
          state == State::kAllocated ? b->requested.load(std::memory_order_relaxed) : 0;
      seg.blocks.push_back(block);
    }
    out.push_back(std::move(seg));
  }
  return out;
}

std::string CachingAllocator::Impl::Summary() const {
  const MemoryStats st = Stats();
  std::string out;
  const std::string rule(86, '=');
  const std::string thin(86, '-');
  absl::StrAppend(&out, rule, "\n");
  absl::StrAppendFormat(&out, " CachingAllocator summary: %s (%s)\n",
                        backend_->device().ToString(), ToAbsl(backend_->name()));
  absl::StrAppend(&out, thin, "\n");
  absl::StrAppendFormat(&out, " %-30s | %11s | %11s | %11s | %11s\n", "Metric",
                        "Cur usage", "Peak usage", "Tot alloc", "Tot freed");
  absl::StrAppend(&out, thin, "\n");
  auto row = [&out](const char* name, const MemoryStat& s) {
    absl::StrAppendFormat(&out, " %-30s | %11s | %11s | %11s | %11s\n", name,
                          Human(s.current), Human(s.peak),
                          Human(s.allocated), Human(s.freed));
  };
  auto group = [&](const char* name, MemoryStat PoolMemoryStats::*field) {
    row(name, st.all.*field);
    row("  from large pool", st.large_pool.*field);
    row("  from small pool", st.small_pool.*field);
  };
  group("Allocated memory", &PoolMemoryStats::allocated_bytes);
  group("Active memory", &PoolMemoryStats::active_bytes);
  group("Reserved memory", &PoolMemoryStats::reserved_bytes);
  group("Cached memory", &PoolMemoryStats::cached_bytes);
  group("Non-releasable (inactive split)", &PoolMemoryStats::inactive_split_bytes);
  group("Requested memory", &PoolMemoryStats::requested_bytes);
  absl::StrAppend(&out, thin, "\n");
  absl::StrAppendFormat(&out, " %-30s | %d\n", "Allocations", st.num_allocations);
  absl::StrAppendFormat(&out, " %-30s | %d\n", "Frees", st.num_frees);
  absl::StrAppendFormat(&out, " %-30s | %d hits, %d misses (%.1f%% hit rate)\n",
                        "Cache", st.num_cache_hits, st.num_cache_misses,
                        100.0 * st.cache_hit_rate());
  absl::StrAppendFormat(&out, " %-30s | %d now, %d allocated, %d freed\n", "Segments",
                        st.num_segments, st.num_segment_allocs, st.num_segment_frees);
  if (expandable()) {
    absl::StrAppendFormat(&out, " %-30s | %d maps, %d unmaps (chunks of %s)\n",
                          "Expandable segments", st.num_maps, st.num_unmaps,
                          Human(static_cast<int64_t>(chunk_)));
  }
  absl::StrAppendFormat(&out, " %-30s | %d OOMs, %d retries\n", "Out of memory",
                        st.num_ooms, st.num_alloc_retries);
  absl::StrAppendFormat(&out, " %-30s | %s, fragmentation %.2f\n", "Largest free block",
                        Human(st.largest_free_block),
                        st.fragmentation_ratio());
  absl::StrAppend(&out, rule, "\n");
  return out;
}

std::string CachingAllocator::Impl::OomMessageLocked(size_t bytes, size_t size,
                                                     size_t segment_size,
                                                     const OomReason& why) const {
  const char* label = backend_->kind() == MemoryKind::kDevice       ? "CUDA OOM"
                      : backend_->kind() == MemoryKind::kPinnedHost ? "pinned host OOM"
                                                                    : "host OOM";
  const int64_t allocated = GaugeNow(kAllocatedBytes, kAllPools);
  const int64_t reserved = GaugeNow(kReservedBytes, kAllPools);
  const int64_t cached = GaugeNow(kCachedBytes, kAllPools);
  const int64_t largest = LargestFreeBlockLocked();
  const double fragmentation =
      cached > 0 ? std::max(0.0, 1.0 - static_cast<double>(largest) / cached) : 0.0;
  std::string msg = absl::StrFormat(
      "%s: %s (%s) could not allocate %s (rounded to %d bytes, needing at most %s "
      "from the backend). ",
      label, backend_->device().ToString(), ToAbsl(backend_->name()), Bytes(bytes),
      size, Bytes(segment_size));
  absl::StatusOr<BackendMemoryInfo> info = backend_->MemoryInfo();
  absl::StrAppend(&msg, "This pool has ", Bytes(allocated), " allocated and ",
                  Bytes(reserved), " reserved; ");
  if (info.ok()) {
    absl::StrAppend(&msg, "the device has ", Bytes(info->free_bytes), " free of ",
                    Bytes(info->total_bytes), " total. ");
  } else {
    absl::StrAppend(&msg, "the device's free and total memory are unknown (",
                    info.status().message(), "). ");
  }
  absl::StrAppendFormat(&msg, "Largest free block: %s; fragmentation ratio %.2f. ",
                        Bytes(largest), fragmentation);
  if (why.limit_hit) {
    absl::StrAppendFormat(&msg,
                          "The limit hit was memory_fraction = %g, which caps this "
                          "pool at %s. ",
                          opt_.memory_fraction, Bytes(allowed_max_));
  } else {
    absl::StrAppend(&msg, "The backend reported: ", why.backend_message, ". ");
  }
  std::vector<std::string> advice;
  if (why.limit_hit) {
    advice.push_back("raise memory_fraction if the device has room for more");
  }
  if (total_bytes_ > 0 && size > total_bytes_) {
    advice.push_back("this single request is larger than the device's total memory");
  }
  if (fragmentation >= 0.5 && cached >= static_cast<int64_t>(size) &&
      largest < static_cast<int64_t>(size) &&
      opt_.max_split_size == kNoLimit) {
    advice.push_back(absl::StrCat(
        "cached memory (", Human(cached),
        ") is fragmented into blocks too small for this request; setting "
        "max_split_size keeps large blocks from being split and can avoid this"));
  }
  advice.push_back("free tensors that are no longer needed or reduce the batch size");
  absl::StrAppend(&msg, "Advice: ", absl::StrJoin(advice, "; "), ".");
  return msg;
}

// ----- Observers -----

void CachingAllocator::Impl::Dispatch(const Sink& events) {
  if (events.empty()) return;
  std::vector<std::shared_ptr<AllocatorObserver>> observers;
  {
    std::lock_guard<std::mutex> lock(observers_mu_);
    observers = observers_;
  }
  for (const AllocatorEvent& e : events) {
    for (const auto& o : observers) o->OnEvent(e);
  }
}

void CachingAllocator::Impl::ReportFastSlow(ThreadCache& cache, AllocatorEventType type,
                                            size_t size, size_t requested, const void* ptr,
                                            StreamId stream) {
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
  e.small_pool = size < opt_.small_size_limit;
  e.from_thread_cache = true;
  for (const auto& o : list->observers) o->OnFastEvent(e);
}

void CachingAllocator::Impl::PublishObserversLocked() {
  auto list = std::make_unique<ObserverList>();
  list->observers = observers_;
  fast_observers_.store(list.get(), std::memory_order_release);
  // Fast-path reports that loaded the old list (or use a sink from it) hold their
  // thread's report_mu; taking each (as another thread) waits for them, and the sinks,
  // cleared, are asked for again from the new list. The caches are copied first so
  // that a report calling Stats() (which takes registry_->mu) cannot deadlock with this.
  std::vector<std::shared_ptr<ThreadCache>> caches;
  {
    std::lock_guard<std::mutex> lock(registry_->mu);
    caches = registry_->caches;
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

void CachingAllocator::Impl::AddObserver(std::shared_ptr<AllocatorObserver> observer) {
  if (observer == nullptr) return;
  std::lock_guard<std::mutex> lock(observers_mu_);
  observers_.push_back(std::move(observer));
  PublishObserversLocked();
  num_observers_.store(static_cast<int>(observers_.size()), std::memory_order_relaxed);
}

void CachingAllocator::Impl::RemoveObserver(const AllocatorObserver* observer) {
  std::lock_guard<std::mutex> lock(observers_mu_);
  std::erase_if(observers_, [observer](const auto& o) { return o.get() == observer; });
  num_observers_.store(static_cast<int>(observers_.size()), std::memory_order_relaxed);
  PublishObserversLocked();
}

// ----- CachingAllocator -----

absl::Status CachingAllocator::ValidateOptions(const AllocatorOptions& o) {
  auto bad = [](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("AllocatorOptions: ", what));
  };
  if (!std::has_single_bit(o.block_rounding) || o.block_rounding < 512) {
    return bad(absl::StrCat("block_rounding = ", o.block_rounding,
                            " must be a power of two >= 512"));
  }
  if (o.small_size_limit == 0 || o.small_size_limit % o.block_rounding != 0) {
    return bad(absl::StrCat("small_size_limit = ", o.small_size_limit,
                            " must be a positive multiple of block_rounding (",
                            o.block_rounding, ")"));
  }
  if (o.small_segment_size < o.small_size_limit ||
      o.small_segment_size % o.block_rounding != 0) {
    return bad(absl::StrCat("small_segment_size = ", o.small_segment_size,
                            " must be a multiple of block_rounding (", o.block_rounding,
                            ") and >= small_size_limit (", o.small_size_limit, ")"));
  }
  if (o.large_segment_threshold < o.small_size_limit) {
    return bad(absl::StrCat("large_segment_threshold = ", o.large_segment_threshold,
                            " must be >= small_size_limit (", o.small_size_limit, ")"));
  }
  if (o.large_segment_size < o.large_segment_threshold ||
      o.large_segment_size % o.block_rounding != 0) {
    return bad(absl::StrCat("large_segment_size = ", o.large_segment_size,
                            " must be a multiple of block_rounding (", o.block_rounding,
                            ") and >= large_segment_threshold (",
                            o.large_segment_threshold, ")"));
  }
  if (!std::has_single_bit(o.expandable_piece_size)) {
    return bad(absl::StrCat("expandable_piece_size = ", o.expandable_piece_size,
                            " must be a power of two"));
  }
  if (!std::has_single_bit(o.large_segment_rounding) ||
      o.large_segment_rounding < o.block_rounding) {
    return bad(absl::StrCat("large_segment_rounding = ", o.large_segment_rounding,
                            " must be a power of two >= block_rounding (",
                            o.block_rounding, ")"));
  }
  if (o.roundup_power2_divisions != 0 &&
      (o.roundup_power2_divisions < 0 || o.roundup_power2_divisions > 64 ||
       !std::has_single_bit(static_cast<size_t>(o.roundup_power2_divisions)))) {
    return bad(absl::StrCat("roundup_power2_divisions = ", o.roundup_power2_divisions,
                            " must be 0 or a power of two <= 64"));
  }
  if (o.max_split_size != kNoLimit && o.max_split_size < o.small_size_limit) {
    return bad(absl::StrCat("max_split_size = ", o.max_split_size,
                            " must be unlimited or >= small_size_limit (",
                            o.small_size_limit, ")"));
  }
  if (!(o.memory_fraction > 0.0 && o.memory_fraction <= 1.0)) {
    return bad(absl::StrCat("memory_fraction = ", o.memory_fraction,
                            " must be in (0, 1]"));
  }
  if (!(o.garbage_collection_threshold >= 0.0 && o.garbage_collection_threshold <= 1.0)) {
    return bad(absl::StrCat("garbage_collection_threshold = ",
                            o.garbage_collection_threshold,
                            " must be 0 (off) or in (0, 1]"));
  }
  if (o.thread_cache_blocks < 0) {
    return bad(absl::StrCat("thread_cache_blocks = ", o.thread_cache_blocks,
                            " must be >= 0"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CachingAllocator>> CachingAllocator::Create(
    std::unique_ptr<Backend> backend, AllocatorOptions options,
    std::unique_ptr<StreamEvents> events) {
  if (backend == nullptr) {
    return absl::InvalidArgumentError("CachingAllocator::Create: backend is null");
  }
  GENESIS_RETURN_IF_ERROR(ValidateOptions(options));
  if (options.expandable_segments == ExpandableSegments::kOn &&
      backend->virtual_memory() == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "CachingAllocator::Create: expandable_segments is on, but backend ",
        ToAbsl(backend->name()), " has no virtual memory"));
  }
  if (const VirtualMemory* vm = backend->virtual_memory();
      vm != nullptr && options.expandable_segments != ExpandableSegments::kOff &&
      (!std::has_single_bit(vm->granularity()) || vm->granularity() < options.block_rounding)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CachingAllocator::Create: backend ", ToAbsl(backend->name()),
        " has virtual memory granularity ", vm->granularity(),
        "; expandable segments need a power of two >= block_rounding"));
  }
  if (!std::has_single_bit(backend->alignment()) || backend->alignment() < 512) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CachingAllocator::Create: backend ", ToAbsl(backend->name()),
        " has alignment ", backend->alignment(), "; the pool needs a power of two >= 512"));
  }
  size_t total = 0;
  absl::StatusOr<BackendMemoryInfo> info = backend->MemoryInfo();
  if (info.ok()) {
    total = info->total_bytes;
  } else if (options.memory_fraction < 1.0 || options.garbage_collection_threshold > 0) {
    return Annotate(info.status(),
                    "CachingAllocator::Create: memory_fraction and "
                    "garbage_collection_threshold need the backend's total memory");
  }
  std::vector<size_t> warm_up = options.warm_up_sizes;
  auto impl = std::make_unique<Impl>(std::move(backend), std::move(options),
                                     std::move(events), total);
  std::unique_ptr<CachingAllocator> pool(new CachingAllocator(std::move(impl)));
  if (!warm_up.empty()) GENESIS_RETURN_IF_ERROR(pool->WarmUp(warm_up, kNoStream));
  return pool;
}

CachingAllocator::CachingAllocator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CachingAllocator::~CachingAllocator() = default;

absl::StatusOr<void*> CachingAllocator::Allocate(size_t bytes, StreamId stream) {
  return impl_->Allocate(bytes, stream);
}
absl::Status CachingAllocator::Free(void* ptr) { return impl_->Free(ptr); }
absl::Status CachingAllocator::RecordStream(void* ptr, StreamId stream) {
  return impl_->RecordStream(ptr, stream);
}
size_t CachingAllocator::AllocationSize(const void* ptr) const {
  return impl_->AllocationSize(ptr);
}
bool CachingAllocator::Owns(const void* ptr) const {
  return impl_->AllocationSize(ptr) != 0;
}
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
