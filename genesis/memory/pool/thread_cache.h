// The front end's thread cache: freed blocks that one thread keeps for itself, in bins by
// (block size, stream), taken and put back on the fast path under the thread's
// OwnerLock (no locked instruction on the owner's side, no pool-wide lock); the blocks
// the thread took from it (so that it can free them again without the allocation map);
// and the thread's unfolded statistics. Another thread takes the lock only to flush the
// cache, read its statistics or change the observers.
//
// The block a thread freed last is held back from its bin as the cache's *hot* block,
// with its statistics deferred: if the thread's next call allocates the same size on the
// same stream, it gets that block back and the pair costs a few counters (the common
// loop that allocates and frees one buffer, or the same buffers, again and again). Any
// other call settles the hot block first (it goes into its bin and its statistics are
// folded in as a push), as does anyone who reads or takes the cache, so what the
// statistics say, peaks included, is what they would say without it. Handed out again,
// the hot block stays the cache's hot record, marked taken, so that its next free finds
// it with one compare (PopHot and FreeHot: the whole of the common pair); a taken record
// is a handed-out entry like those in `handed_out`, into which it moves when another
// block becomes hot. A block the thread just allocated from the pool and frees at once
// may be held as the hot block even where the cache's limits have no room for it
// (HoldOverBudget); settled, it waits in `overflow` for the pool.
#ifndef GENESIS_MEMORY_POOL_THREAD_CACHE_H_
#define GENESIS_MEMORY_POOL_THREAD_CACHE_H_

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/node_hash_map.h"
#include "genesis/memory/observer.h"
#include "genesis/memory/owner_lock.h"
#include "genesis/memory/pool/block.h"
#include "genesis/memory/pool/thread_stats.h"
#include "genesis/memory/stream_events.h"

namespace genesis::memory::pool_internal {

// A request of `bytes` rounded up to its block size, `rounding_mask` being the block
// rounding (a power of two) less one; a request of 0 takes one unit.
inline size_t RoundedToBlock(size_t bytes, size_t rounding_mask) {
  return (std::max<size_t>(bytes, 1) + rounding_mask) & ~rounding_mask;
}

struct BinKey {
  size_t size;
  StreamId stream;
  bool operator==(const BinKey&) const = default;
  template <typename H>
  friend H AbslHashValue(H h, const BinKey& k) {
    return H::combine(std::move(h), k.size, k.stream);
  }
};

// How much a thread cache may hold.
struct ThreadCacheLimits {
  size_t max_bytes = 0;           // AllocatorOptions::thread_cache_bytes.
  size_t max_blocks_per_bin = 0;  // AllocatorOptions::thread_cache_blocks.
  // Large blocks are cached only when no policy (cache_limit, garbage collection) must
  // see freed segments at once to release them.
  bool large_blocks = false;
};

// What a free into the thread's own cache gives back, for observers.
struct FastFreed {
  size_t size = 0;
  size_t requested = 0;
  StreamId stream = kNoStream;
};

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
  // Bin's hash lookup; remembers the bin in `recent`.
  [[gnu::noinline]] BinVector* FindBin(size_t size, StreamId stream, bool create);

  // Bytes of the blocks in `bins`. Written under `mu` (by the owner or a flush); atomic
  // so that the pool can ask, without the lock, whether the cache holds anything.
  std::atomic<size_t> bytes{0};
  // Adds `delta` (may be negative) to `bytes`. The caller holds `mu`.
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
    BinVector* bin = nullptr;  // The bin it came from, where it goes back.
  };
  static constexpr int kHandedOutSlots = 256;
  // The handed_out slot for address `p` (a multiplicative hash of its 512-byte unit).
  static int SlotFor(const void* p) {
    return static_cast<int>(((reinterpret_cast<uintptr_t>(p) >> 9) * 0x9E3779B97F4A7C15ull) >>
                            56);
  }
  // The block freed last, not yet in its bin (block == nullptr: none). It is
  // kThreadCached and counted in `bytes` and by its bin's limit; its push into the bin
  // and the statistics of that push wait until Settle.
  // With `taken`, the block is not cached but handed out again (its allocation's
  // alloc_seq and requested bytes here): the record stands for a handed_out entry.
  struct Hot {
    Block* block = nullptr;
    char* ptr = nullptr;
    size_t size = 0;
    StreamId stream = kNoStream;
    size_t requested = 0;  // Of the allocation that was freed (taken: that is live).
    uint64_t seq = 0;      // Its alloc_seq.
    BinVector* bin = nullptr;
    int pool = 0;
    bool split = false;
    bool taken = false;
    // Held although the cache's limits had no room for it (HoldOverBudget): settled, it
    // goes to `overflow`, never into its bin.
    bool over_budget = false;
    // stats.version() when the highs of this block's deferred push were last raised.
    uint64_t raised_version = 0;
    // `pushes` when the block last fitted the cache's limits. Only a push makes room
    // scarcer while the record stays, so with `pushes` unchanged it still fits.
    uint64_t fitted_at = 0;
    // Pairs (deferred push, then taken again) for `requested` bytes both times, not yet
    // in `stats`: they move no gauge, so only the totals wait for them.
    int64_t pairs = 0;
  };
  Hot hot;
  // Blocks pushed into bins by PushInto so far (Hot::fitted_at).
  uint64_t pushes = 0;
  // An over-budget hot block once settled: out of the bins and of `bytes`, accounted in
  // `stats` as cached, until the owner gives it back to the pool (its next call) or a
  // flush takes it with the other blocks (TakeBlocks). Written under `mu`; atomic so
  // that the owner can look for it without the lock.
  std::atomic<Block*> overflow{nullptr};
  // The thread's last allocation from the pool and stats.version() then (MarkFresh).
  const void* fresh = nullptr;
  uint64_t fresh_version = 0;

  // Holding `mu`. Accounts for the hot record's pending pairs and puts the hot block, if
  // any (and not taken), into its bin and accounts for it there.
  void Settle() {
    if (hot.block != nullptr) [[unlikely]] SettleHot();
  }

  // What this thread's fast path did since its figures were last folded into the
  // pool's atomics. Guarded by `mu`, like the bins, so a flush folds them together with
  // the blocks, and the common path writes no shared cache line.
  ThreadStats stats;
  // Last, so that the fields every call touches share few cache lines.
  HandedOut handed_out[kHandedOutSlots];

  // Owner only. The common pair's allocation: Pop of `requested` bytes (`rounding_mask`:
  // block rounding less one) when the hot block is cached, on `stream` and of their
  // block size; nullptr (nothing changed) otherwise, and while another thread holds or
  // waits for the cache. The size is rounded only when the request differs from the one
  // that was freed. Calls no function.
  [[gnu::always_inline]] char* PopHot(size_t requested, StreamId stream,
                                      size_t rounding_mask) {
    if (!mu.TryLockAsOwner()) [[unlikely]] return nullptr;
    char* p = nullptr;
    if (hot.block != nullptr && !hot.taken && hot.stream == stream &&
        (hot.requested == requested || hot.size == RoundedToBlock(requested, rounding_mask))) {
      p = TakeHot(requested);
    }
    mu.UnlockAsOwner();
    return p;
  }

  // Owner only. The common pair's free: FreeOwn when `ptr` is the hot block handed out
  // (taken); false otherwise, and while another thread holds or waits for the cache,
  // with nothing changed but a stale hot record forgotten. Calls no function.
  [[gnu::always_inline]] bool FreeHot(const void* ptr, const ThreadCacheLimits& limits) {
    if (!mu.TryLockAsOwner()) [[unlikely]] return false;
    const bool freed = hot.taken && hot.ptr == ptr && RestoreHot(limits, nullptr);
    mu.UnlockAsOwner();
    return freed;
  }

  // Owner only. Takes a cached block of `size` for `stream`, marks it allocated for
  // `requested` bytes with a new alloc_seq, remembers it as handed out and accounts for
  // it in `stats`; nullptr if the cache has none.
  char* Pop(size_t size, StreamId stream, size_t requested) {
    OwnerLock::AsOwner lock(mu);
    if (hot.block != nullptr && !hot.taken) {
      if (hot.size == size && hot.stream == stream) [[likely]] return TakeHot(requested);
      SettleHot();
    }
    BinVector* bin = Bin(size, stream, /*create=*/false);
    if (bin == nullptr || bin->empty()) return nullptr;
    const Cached& c = bin->back();
    Block* const b = c.block;
    char* const ptr = c.ptr;
    // Only the thread that holds a block's bin hands it out, so a plain increment will do.
    const uint64_t seq = c.seq + 1;
    const int pool = c.pool;
    const bool split = c.split;
    bin->pop_back();
    // The bin's key is the block's size.
    AddBytes(-static_cast<int64_t>(size));
    b->requested.store(requested, std::memory_order_relaxed);
    b->alloc_seq.store(seq, std::memory_order_relaxed);
    b->state.store(State::kAllocated, std::memory_order_relaxed);
    handed_out[SlotFor(ptr)] = {ptr, b, seq, bin};
    stats.Account</*kTaken=*/true>(pool, static_cast<int64_t>(size),
                                   static_cast<int64_t>(requested), split);
    return ptr;
  }

  // Owner only, holding `mu`. Puts the allocated block `b` (`requested` bytes asked for,
  // alloc_seq `seq`) into its bin as kThreadCached and accounts for it; false (nothing
  // changed) if `limits` leave no room for it.
  bool PushLocked(Block* b, size_t requested, uint64_t seq, const ThreadCacheLimits& limits) {
    if (b->pool != kSmall && !limits.large_blocks) return false;
    Settle();
    return PushInto(*Bin(b->size, b->stream, /*create=*/true), b, requested, seq, limits);
  }

  // Owner only. PushLocked under `mu`, with the block's current alloc_seq.
  bool Push(Block* b, size_t requested, const ThreadCacheLimits& limits) {
    OwnerLock::AsOwner lock(mu);
    return PushLocked(b, requested, b->alloc_seq.load(std::memory_order_relaxed), limits);
  }

  // Owner only. Remembers `ptr`, just allocated from the pool, as the thread's fresh
  // allocation until the cache's statistics next move (any call but a hot pair).
  void MarkFresh(const void* ptr) {
    OwnerLock::AsOwner lock(mu);
    fresh = ptr;
    fresh_version = stats.version();
  }

  // Owner only, for an allocated block `b` (`requested` bytes asked for) that Push just
  // refused for want of room: holds it all the same as the cache's hot block, over the
  // cache's bytes, so that allocating its size again next is the hot pair. Only the
  // thread's fresh allocation (MarkFresh), freed with no call in between but hot pairs
  // of other blocks, qualifies: the loop that allocates and frees one buffer again and
  // again. Blocks that live across other calls go back to the pool, where best fit may
  // place the next request of their size better. Any other call settles the held block
  // into `overflow`, from where it goes back to the pool, so the cache holds more than
  // its limits for no longer than until the thread's next call. False (nothing changed)
  // if the block does not qualify, its pool is not cached, it is larger than the whole
  // cache may hold, its bin is full, or `overflow` is taken.
  bool HoldOverBudget(Block* b, size_t requested, const ThreadCacheLimits& limits) {
    if ((b->pool != kSmall && !limits.large_blocks) || b->size > limits.max_bytes) return false;
    OwnerLock::AsOwner lock(mu);
    if (b->ptr != fresh || fresh_version != stats.version() ||
        overflow.load(std::memory_order_relaxed) != nullptr) {
      return false;
    }
    BinVector* const bin = Bin(b->size, b->stream, /*create=*/true);
    if (bin->size() >= limits.max_blocks_per_bin) return false;
    VacateHot();
    const size_t size = b->size;
    hot = {b, b->ptr, size, b->stream, requested, b->alloc_seq.load(std::memory_order_relaxed),
           bin, b->pool, b->split, /*taken=*/false, /*over_budget=*/true, stats.version(),
           /*fitted_at=*/pushes};
    AddBytes(static_cast<int64_t>(size));
    b->state.store(State::kThreadCached, std::memory_order_relaxed);
    b->requested.store(0, std::memory_order_relaxed);
    stats.RaiseForDeferredPush(hot.pool, static_cast<int64_t>(size), hot.split);
    return true;
  }

  // Holding `mu`: takes the block in `overflow`, if any.
  Block* TakeOverflow() { return overflow.exchange(nullptr, std::memory_order_relaxed); }

  // Owner only. Frees `ptr` into this cache if this thread took it from here and it is
  // still that allocation, with no recorded streams: no allocation-map lookup. False
  // sends the free down the usual path. `freed` (if not null) receives the block's size,
  // requested bytes and stream.
  bool FreeOwn(const void* ptr, const ThreadCacheLimits& limits, FastFreed* freed) {
    OwnerLock::AsOwner lock(mu);
    if (hot.taken && hot.ptr == ptr) return RestoreHot(limits, freed);
    HandedOut& slot = handed_out[SlotFor(ptr)];
    if (slot.ptr != ptr) return false;
    Block* b = slot.block;
    const uint64_t seq = slot.seq;
    BinVector* const slot_bin = slot.bin;
    slot.ptr = nullptr;  // Used up: the other fields count only with a matching ptr.
    // Still the allocation this thread handed out, with no other streams? Otherwise
    // (freed elsewhere, handed out again, merged away, a stream recorded) the ordinary
    // path decides.
    if (b->alloc_seq.load(std::memory_order_relaxed) != seq) return false;
    const size_t requested = b->requested.load(std::memory_order_relaxed);
    if (freed != nullptr) *freed = {b->size, requested, b->stream};
    // It came from this cache, so its pool's blocks may be cached. It becomes the hot
    // block, in place of the one before.
    VacateHot();
    const size_t size = b->size;
    if (!Fits(*slot_bin, size, limits)) return false;
    const int pool = b->pool;
    const bool split = b->split;
    hot = {b, b->ptr, size, b->stream, requested, seq, slot_bin, pool, split,
           /*taken=*/false, /*over_budget=*/false, stats.version(), /*fitted_at=*/pushes};
    AddBytes(static_cast<int64_t>(size));
    b->state.store(State::kThreadCached, std::memory_order_relaxed);
    b->requested.store(0, std::memory_order_relaxed);
    stats.RaiseForDeferredPush(pool, static_cast<int64_t>(size), split);
    return true;
  }

  // Holding `mu`. Forgets the bins, the recent bins and the handed-out blocks (a cache
  // whose thread exits).
  void Forget();

  // Holding `mu` (as owner or not). Moves every cached block (`overflow` included) to
  // `blocks` and empties the bins (their records and `recent` stay); the statistics are
  // left to the caller.
  void TakeBlocks(std::vector<Block*>* blocks);

 private:
  // Whether `limits` leave room in the cache and in `bin` for a block of `size` (the
  // hot block, if any, already counted in both).
  bool Fits(const BinVector& bin, size_t size, const ThreadCacheLimits& limits) const {
    return bytes.load(std::memory_order_relaxed) + size <= limits.max_bytes &&
           bin.size() < limits.max_blocks_per_bin;
  }

  // Holding `mu` as owner. Hands the hot block out again for `requested` bytes: as Pop
  // does, with the deferred push and this pop accounted for as one pair. The record
  // stays, taken.
  char* TakeHot(size_t requested) {
    Block* const b = hot.block;
    const uint64_t seq = hot.seq + 1;
    // Read before the block's fields are written, which the compiler must assume alias.
    const size_t requested_before = hot.requested;
    char* const ptr = hot.ptr;
    hot.seq = seq;
    hot.taken = true;
    AddBytes(-static_cast<int64_t>(hot.size));
    b->requested.store(requested, std::memory_order_relaxed);
    b->alloc_seq.store(seq, std::memory_order_relaxed);
    b->state.store(State::kAllocated, std::memory_order_relaxed);
    if (requested == requested_before) [[likely]] {
      ++hot.pairs;
    } else {
      stats.AccountPair(hot.pool, static_cast<int64_t>(hot.size),
                        static_cast<int64_t>(requested_before),
                        static_cast<int64_t>(requested), hot.split);
      hot.requested = requested;
    }
    return ptr;
  }

  // Holding `mu`. Accounts for the hot record's pending pairs in `stats`.
  void AccountPendingPairs() {
    if (hot.pairs == 0) return;
    stats.AccountPairs(hot.pool, static_cast<int64_t>(hot.size),
                       static_cast<int64_t>(hot.requested), hot.split, hot.pairs);
    hot.pairs = 0;
  }

  // Holding `mu` as owner, with the hot record taken: FreeOwn of its block, which
  // becomes the cached hot block again. The highs its deferred push raises are raised
  // again only if the statistics moved since they last were. False (the record is
  // forgotten, so the ordinary path decides) if the block is no longer that allocation
  // or `limits` leave no room for it.
  [[gnu::always_inline]] bool RestoreHot(const ThreadCacheLimits& limits, FastFreed* freed) {
    Block* const b = hot.block;
    if (b->alloc_seq.load(std::memory_order_relaxed) != hot.seq ||
        (hot.fitted_at != pushes && !Fits(*hot.bin, hot.size, limits))) [[unlikely]] {
      AccountPendingPairs();
      hot.block = nullptr;
      hot.taken = false;
      return false;
    }
    hot.fitted_at = pushes;
    if (freed != nullptr) *freed = {hot.size, hot.requested, hot.stream};
    hot.taken = false;
    AddBytes(static_cast<int64_t>(hot.size));
    b->state.store(State::kThreadCached, std::memory_order_relaxed);
    b->requested.store(0, std::memory_order_relaxed);
    if (hot.raised_version != stats.version()) [[unlikely]] {
      stats.RaiseForDeferredPush(hot.pool, static_cast<int64_t>(hot.size), hot.split);
      hot.raised_version = stats.version();
    }
    return true;
  }

  // Holding `mu` as owner. Clears the hot record for another block: a cached hot block
  // goes into its bin (Settle), a taken one into handed_out.
  void VacateHot() {
    if (hot.block == nullptr) return;
    if (hot.taken) {
      AccountPendingPairs();
      handed_out[SlotFor(hot.ptr)] = {hot.ptr, hot.block, hot.seq, hot.bin};
      hot.block = nullptr;
      hot.taken = false;
      return;
    }
    SettleHot();
  }

  // Settle, for a cache that holds a hot record.
  void SettleHot();

  // PushLocked into `bin`, the bin of the block's size and stream.
  bool PushInto(BinVector& bin, Block* b, size_t requested, uint64_t seq,
                const ThreadCacheLimits& limits) {
    const size_t size = b->size;
    if (!Fits(bin, size, limits)) return false;
    const int pool = b->pool;
    const bool split = b->split;
    bin.push_back({b, b->ptr, seq, pool, split});
    ++pushes;
    AddBytes(static_cast<int64_t>(size));
    b->state.store(State::kThreadCached, std::memory_order_relaxed);
    b->requested.store(0, std::memory_order_relaxed);
    // A cached block that does not span its segment keeps the segment split.
    stats.Account</*kTaken=*/false>(pool, static_cast<int64_t>(size),
                                    static_cast<int64_t>(requested), split);
    return true;
  }
};

}  // namespace genesis::memory::pool_internal

#endif  // GENESIS_MEMORY_POOL_THREAD_CACHE_H_
