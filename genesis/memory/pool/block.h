// Blocks and segments: the pool's records of the memory it carved out of its backend.
// A segment is one allocation from the backend (a classic segment) or one reserved range
// of virtual memory (an expandable segment); its blocks tile it, linked by address.
// Block records are recycled, never deleted, while the pool lives (see Block::alloc_seq),
// so the fast path may read a block through a stale pointer.
#ifndef GENESIS_MEMORY_POOL_BLOCK_H_
#define GENESIS_MEMORY_POOL_BLOCK_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "genesis/memory/pool/stat_index.h"
#include "genesis/memory/stream_events.h"

namespace genesis::memory::pool_internal {

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
  // Bumped each time the block is handed out, claimed by a free that goes through the
  // allocation map, or given a stream by RecordStream: whenever what a thread cache
  // remembers of the allocation (that it is live, with no other streams) stops being
  // true. Block objects are recycled, never deleted, while the pool lives, so a thread
  // may read this through a stale pointer to tell whether the allocation it remembers
  // is still the current one.
  std::atomic<uint64_t> alloc_seq{0};
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

// True if `b` does not span its segment, which keeps the segment from being released
// whole. Every block of an expandable segment counts as such.
inline bool IsSplit(const Block* b) {
  return b->segment->expandable || b->size != b->segment->size;
}

// Deletes `s` and the records of its blocks. The memory itself must already be given
// back (ClassicSegments::FreeMemory, ExpandableSegmentSet::Destroy): for teardown.
inline void DeleteSegmentRecords(Segment* s) {
  for (Block* b = s->head; b != nullptr;) {
    Block* next = b->next;
    delete b;
    b = next;
  }
  delete s;
}

}  // namespace genesis::memory::pool_internal

#endif  // GENESIS_MEMORY_POOL_BLOCK_H_
