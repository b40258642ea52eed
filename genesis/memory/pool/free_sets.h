// The central free lists: the free blocks of each pool (small, large) in one ordered set
// keyed by (stream, size, address), so that best fit is one lower_bound; splitting a
// block and merging a freed block with its free neighbours; the segments that are
// entirely free (candidates for release); and the recycling of block records. All of it
// runs under the pool lock.
#ifndef GENESIS_MEMORY_POOL_FREE_SETS_H_
#define GENESIS_MEMORY_POOL_FREE_SETS_H_

#include <cstddef>
#include <cstdint>
#include <set>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "genesis/memory/allocator_options.h"
#include "genesis/memory/pool/block.h"
#include "genesis/memory/pool/pool_stats.h"
#include "genesis/memory/stream_events.h"

namespace genesis::memory::pool_internal {

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

// Blocks ordered by BlockLess. A block's key fields must not change while it is in one.
using BlockSet = std::set<Block*, BlockLess>;

class FreeSets {
 public:
  // `options` (block_rounding, small_size_limit, max_split_size, large_segment_size)
  // and `stats` (the inactive-split and allocation gauges) must outlive this.
  FreeSets(const AllocatorOptions& options, PoolStats& stats);
  // Deletes the spare block records; blocks still in segments belong to their owner.
  ~FreeSets();
  FreeSets(const FreeSets&) = delete;
  FreeSets& operator=(const FreeSets&) = delete;

  // A block record, recycled if one is spare, with alloc_seq still counting.
  Block* NewBlock();
  // Resets everything of `b` (in no set) but alloc_seq, so that a stale handed-out
  // entry can never match it again, and keeps it for NewBlock.
  void Recycle(Block* b);

  // Puts `b` (in no set) into its pool's free set as kFree; a block that spans its
  // segment marks the segment fully free, any other counts as inactive split.
  void Insert(Block* b);
  // Takes `b` out of its free set, undoing what Insert counted.
  void Erase(Block* b);
  // Inserts `b` (in no set) merged with its free neighbours, whose records are
  // recycled; returns the merged block. Marks the segment used now.
  Block* FreeAndMerge(Block* b);

  // The best-fitting free block of `pool` for `size` bytes on `stream`, or nullptr.
  // With max_split_size set, a classic large block above it (one never split) serves
  // only requests of at least max_split_size that waste less than large_segment_size.
  Block* FindBestFit(int pool, StreamId stream, size_t size) const;
  // Hands out the free block `b` for `size` bytes (`requested` asked for): takes it out
  // of its set, splits off the rest when it is worth keeping (small blocks and blocks
  // of expandable segments: a remainder of at least block_rounding; classic large
  // blocks: one above small_size_limit, from blocks no larger than max_split_size),
  // marks it allocated with a new alloc_seq, and counts the allocation.
  void Take(Block* b, size_t size, size_t requested);
  // Cuts `b` (in no set) at `offset` (0 < offset < b->size); returns the new block that
  // holds the rest, in the same state, in no set.
  Block* Split(Block* b, size_t offset);

  // The largest block in the free sets (0 if none); thread-cached and pending blocks
  // do not count.
  int64_t LargestFreeBlock() const;
  // The free blocks of `pool` (kSmall or kLarge).
  const BlockSet& blocks(int pool) const { return free_[pool]; }
  // The segments whose one block is free.
  const absl::flat_hash_set<Segment*>& fully_free() const { return fully_free_; }

 private:
  const AllocatorOptions& opt_;
  PoolStats& stats_;
  BlockSet free_[3];  // Indexed by kSmall / kLarge.
  absl::flat_hash_set<Segment*> fully_free_;
  uint64_t tick_ = 0;  // Orders segments by last use.
  std::vector<Block*> spare_blocks_;
};

}  // namespace genesis::memory::pool_internal

#endif  // GENESIS_MEMORY_POOL_FREE_SETS_H_
