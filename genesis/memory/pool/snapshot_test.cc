#include "genesis/memory/pool/snapshot.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "genesis/memory/pool/block.h"
#include "genesis/memory/pool/segment_map.h"
#include "genesis/memory/pool/stat_index.h"
#include "genesis/memory/segment_snapshot.h"

namespace genesis::memory::pool_internal {
namespace {

TEST(SnapshotTest, SegmentsInAddressOrderWithTheirBlocksStates) {
  // An expandable segment: allocated, thread-cached, pending, unmapped.
  Segment big;
  big.ptr = reinterpret_cast<char*>(uintptr_t{0x20000000});
  big.size = 16384;
  big.pool = kLarge;
  big.stream = 9;
  big.expandable = true;
  Block b[4];
  const State states[4] = {State::kAllocated, State::kThreadCached, State::kPending,
                           State::kUnmapped};
  for (int i = 0; i < 4; ++i) {
    b[i].ptr = big.ptr + 4096 * i;
    b[i].size = 4096;
    b[i].stream = 9;
    b[i].segment = &big;
    b[i].state.store(states[i]);
    b[i].requested.store(1000 + i);
    if (i > 0) b[i].prev = &b[i - 1];
    if (i < 3) b[i].next = &b[i + 1];
  }
  big.head = &b[0];
  // A classic small segment with one free block, at a lower address.
  Segment small;
  small.ptr = reinterpret_cast<char*>(uintptr_t{0x10000000});
  small.size = 2048;
  Block free_block;
  free_block.ptr = small.ptr;
  free_block.size = 2048;
  free_block.segment = &small;
  small.head = &free_block;

  SegmentMap segments;
  segments.Add(&big);
  segments.Add(&small);
  const std::vector<SegmentSnapshot> snap = SnapshotSegments(segments);
  ASSERT_EQ(snap.size(), 2u);
  EXPECT_EQ(snap[0].address, small.ptr);
  EXPECT_EQ(snap[0].pool, PoolKind::kSmall);
  EXPECT_FALSE(snap[0].expandable);
  EXPECT_EQ(snap[0].mapped_bytes, 2048u);
  ASSERT_EQ(snap[0].blocks.size(), 1u);
  EXPECT_EQ(snap[0].blocks[0].state, BlockState::kFree);

  const SegmentSnapshot& s = snap[1];
  EXPECT_EQ(s.pool, PoolKind::kLarge);
  EXPECT_TRUE(s.expandable);
  EXPECT_EQ(s.stream, 9u);
  EXPECT_EQ(s.size, 16384u);
  EXPECT_EQ(s.mapped_bytes, 12288u);
  ASSERT_EQ(s.blocks.size(), 4u);
  EXPECT_EQ(s.blocks[0].state, BlockState::kAllocated);
  EXPECT_EQ(s.blocks[0].requested, 1000u);
  EXPECT_EQ(s.blocks[1].state, BlockState::kFree);
  EXPECT_TRUE(s.blocks[1].in_thread_cache);
  EXPECT_EQ(s.blocks[1].requested, 0u);
  EXPECT_EQ(s.blocks[2].state, BlockState::kPendingFree);
  EXPECT_FALSE(s.blocks[2].in_thread_cache);
  EXPECT_EQ(s.blocks[3].state, BlockState::kUnmapped);
  EXPECT_EQ(s.blocks[3].address, big.ptr + 12288);
}

}  // namespace
}  // namespace genesis::memory::pool_internal
