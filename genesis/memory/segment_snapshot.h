// What a pool's memory looks like at one moment: every segment and its blocks, in
// address order (CachingAllocator::Snapshot; also CachingAllocator::SegmentSnapshot and
// friends).
#ifndef GENESIS_MEMORY_SEGMENT_SNAPSHOT_H_
#define GENESIS_MEMORY_SEGMENT_SNAPSHOT_H_

#include <cstddef>
#include <vector>

#include "genesis/memory/stream_events.h"

namespace genesis::memory {

enum class PoolKind { kSmall, kLarge };
// kUnmapped: address space of an expandable segment with no memory behind it.
enum class BlockState { kAllocated, kFree, kPendingFree, kUnmapped };

struct BlockSnapshot {
  const void* address = nullptr;
  size_t size = 0;
  // 0 unless allocated.
  size_t requested = 0;
  BlockState state = BlockState::kFree;
  StreamId stream = kNoStream;
  // A free block held in some thread's cache (not merged with its neighbours until
  // the caches are flushed).
  bool in_thread_cache = false;
};

struct SegmentSnapshot {
  const void* address = nullptr;
  // For an expandable segment, the whole address range; mapped_bytes of it are backed.
  size_t size = 0;
  size_t mapped_bytes = 0;
  bool expandable = false;
  StreamId stream = kNoStream;
  PoolKind pool = PoolKind::kSmall;
  // In address order; their sizes add up to `size`.
  std::vector<BlockSnapshot> blocks;
};

}  // namespace genesis::memory

#endif  // GENESIS_MEMORY_SEGMENT_SNAPSHOT_H_
