// The front end's allocation map: live blocks, and blocks in thread caches, by address,
// in 64 shards, each a hash map behind a spin lock. A block stays in the map while it
// moves between its thread's cache and its user, so a cached pair does no insert; its
// state (allocated, thread-cached) tells a live pointer from a double free. The shard
// locks are leaves: nothing else is taken while one is held.
#ifndef GENESIS_MEMORY_POOL_ALLOCATION_MAP_H_
#define GENESIS_MEMORY_POOL_ALLOCATION_MAP_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "genesis/memory/pool/block.h"

namespace genesis::memory::pool_internal {

// A lock for critical sections of a few dozen instructions that are almost never
// contended (one of 64 map shards): one atomic exchange to take, one store to release,
// where a pthread mutex costs several times that. A waiter yields after a short spin,
// so a holder that was descheduled is not starved.
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

class AllocationMap {
 public:
  // Adds `b` at its address (replacing what was there).
  void Register(Block* b) {
    Shard& shard = ShardFor(b->ptr);
    std::lock_guard<SpinLock> lock(shard.mu);
    shard.blocks[b->ptr] = b;
  }
  // Removes the entry at b's address.
  void Unregister(Block* b) {
    Shard& shard = ShardFor(b->ptr);
    std::lock_guard<SpinLock> lock(shard.mu);
    shard.blocks.erase(b->ptr);
  }

  // If `ptr` is the start of an allocated block, calls `f(*block)` under the shard's
  // lock (which guards the block's recorded streams) and returns true; else false.
  template <typename F>
  bool WithAllocated(const void* ptr, F&& f) const {
    Shard& shard = ShardFor(ptr);
    std::lock_guard<SpinLock> lock(shard.mu);
    auto it = shard.blocks.find(ptr);
    if (it == shard.blocks.end() ||
        it->second->state.load(std::memory_order_relaxed) != State::kAllocated) {
      return false;
    }
    f(*it->second);
    return true;
  }

  // For a free: the allocated block at `ptr`, or nullptr. Under the shard's lock, a block
  // for which `to_thread_cache(block)` is true is marked kThreadCached and stays in the
  // map (so a second free is caught, and the next allocation that takes it from the
  // cache needs no update); any other leaves the map. `*cached` says which.
  template <typename ToThreadCache>
  Block* ClaimForFree(const void* ptr, ToThreadCache&& to_thread_cache, bool* cached) {
    Shard& shard = ShardFor(ptr);
    std::lock_guard<SpinLock> lock(shard.mu);
    auto it = shard.blocks.find(ptr);
    if (it == shard.blocks.end() ||
        it->second->state.load(std::memory_order_relaxed) != State::kAllocated) {
      return nullptr;
    }
    Block* b = it->second;
    // Whoever remembers this allocation (a thread cache) must now see it ended.
    b->alloc_seq.store(b->alloc_seq.load(std::memory_order_relaxed) + 1,
                       std::memory_order_relaxed);
    *cached = to_thread_cache(*b);
    if (*cached) {
      b->state.store(State::kThreadCached, std::memory_order_relaxed);
    } else {
      shard.blocks.erase(it);
    }
    return b;
  }

  // The size of the allocated block that starts at `ptr`; 0 if there is none.
  size_t AllocatedSize(const void* ptr) const {
    size_t size = 0;
    WithAllocated(ptr, [&size](const Block& b) { size = b.size; });
    return size;
  }

 private:
  struct alignas(64) Shard {
    mutable SpinLock mu;
    absl::flat_hash_map<const void*, Block*> blocks;
  };
  static constexpr int kNumShards = 64;
  Shard& ShardFor(const void* p) const {
    const uint64_t h = (reinterpret_cast<uintptr_t>(p) >> 9) * 0x9E3779B97F4A7C15ull;
    return shards_[h >> 58];
  }

  mutable Shard shards_[kNumShards];
};

}  // namespace genesis::memory::pool_internal

#endif  // GENESIS_MEMORY_POOL_ALLOCATION_MAP_H_
