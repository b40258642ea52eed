#include "genesis/memory/pool/snapshot.h"

#include <atomic>
#include <utility>
#include <vector>

#include "genesis/memory/pool/block.h"
#include "genesis/memory/pool/stat_index.h"

namespace genesis::memory::pool_internal {

std::vector<SegmentSnapshot> SnapshotSegments(const SegmentMap& segments) {
  std::vector<SegmentSnapshot> out;
  out.reserve(segments.size());
  for (const auto& [addr, s] : segments) {
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

}  // namespace genesis::memory::pool_internal
