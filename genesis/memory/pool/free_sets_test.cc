#include "genesis/memory/pool/free_sets.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "genesis/memory/allocator_options.h"
#include "genesis/memory/pool/block.h"
#include "genesis/memory/pool/pool_stats.h"
#include "genesis/memory/pool/stat_index.h"

namespace genesis::memory::pool_internal {
namespace {

constexpr StreamId kStreamA = 0xA;
constexpr StreamId kStreamB = 0xB;

// Segments at made-up addresses (FreeSets never touches the memory).
class FreeSetsTest : public ::testing::Test {
 protected:
  ~FreeSetsTest() override {
    for (Segment* s : segments_) {
      DeleteSegmentRecords(s);
    }
  }

  // A segment of `size` bytes at `base`, its one block free.
  Segment* AddSegment(uintptr_t base, size_t size, int pool, StreamId stream = kStreamA,
                      bool expandable = false) {
    auto* s = new Segment;
    s->ptr = reinterpret_cast<char*>(base);
    s->size = size;
    s->stream = stream;
    s->pool = pool;
    s->expandable = expandable;
    Block* b = free_.NewBlock();
    b->ptr = s->ptr;
    b->size = size;
    b->stream = stream;
    b->pool = pool;
    b->segment = s;
    s->head = b;
    free_.Insert(b);
    segments_.push_back(s);
    return s;
  }

  int64_t Gauge(Gauge g, int pool = kAllPools) const { return stats_.GaugeNow(g, pool); }

  AllocatorOptions options_;
  PoolStats stats_;
  FreeSets free_{options_, stats_};
  std::vector<Segment*> segments_;
};

TEST_F(FreeSetsTest, BestFitIsTheSmallestLargeEnoughBlockThenTheLowestAddress) {
  AddSegment(0x10000000, 8 * 1024, kSmall);
  Segment* high = AddSegment(0x30000000, 16 * 1024, kSmall);
  Segment* low = AddSegment(0x20000000, 16 * 1024, kSmall);
  AddSegment(0x40000000, 64 * 1024, kSmall);
  EXPECT_EQ(free_.FindBestFit(kSmall, kStreamA, 10 * 1024), low->head);
  EXPECT_EQ(free_.FindBestFit(kSmall, kStreamA, 16 * 1024), low->head);
  EXPECT_EQ(free_.FindBestFit(kSmall, kStreamA, 8 * 1024)->size, 8 * 1024u);
  EXPECT_EQ(free_.FindBestFit(kSmall, kStreamA, 65 * 1024), nullptr);
  // Other streams and the other pool see none of them.
  EXPECT_EQ(free_.FindBestFit(kSmall, kStreamB, 512), nullptr);
  EXPECT_EQ(free_.FindBestFit(kLarge, kStreamA, 512), nullptr);
  EXPECT_EQ(free_.fully_free().size(), 4u);
  EXPECT_TRUE(free_.fully_free().contains(high));
}

TEST_F(FreeSetsTest, TakeSplitsOffASmallRemainderOfAtLeastBlockRounding) {
  Segment* s = AddSegment(0x10000000, 2 * kMiB, kSmall);
  Block* b = s->head;
  free_.Take(b, 1536, 1000);
  EXPECT_EQ(b->size, 1536u);
  EXPECT_EQ(b->state.load(), State::kAllocated);
  EXPECT_EQ(b->alloc_seq.load(), 1u);
  EXPECT_EQ(b->requested.load(), 1000u);
  EXPECT_TRUE(b->split);
  ASSERT_NE(b->next, nullptr);
  EXPECT_EQ(b->next->ptr, b->ptr + 1536);
  EXPECT_EQ(b->next->size, 2 * kMiB - 1536);
  EXPECT_EQ(b->next->state.load(), State::kFree);
  EXPECT_EQ(b->next->prev, b);
  EXPECT_FALSE(free_.fully_free().contains(s));
  EXPECT_EQ(Gauge(kAllocatedBytes), 1536);
  EXPECT_EQ(Gauge(kActiveBytes, kSmall), 1536);
  EXPECT_EQ(Gauge(kRequestedBytes), 1000);
  EXPECT_EQ(Gauge(kCachedBytes), -1536);  // No segment was counted as reserved here.
  EXPECT_EQ(Gauge(kInactiveSplitBytes), static_cast<int64_t>(2 * kMiB - 1536));

  // The remainder (less than block_rounding short of the request) is not split again.
  Block* rest = b->next;
  free_.Take(rest, rest->size - 511, 1);
  EXPECT_EQ(rest->next, nullptr);
  EXPECT_EQ(rest->size, 2 * kMiB - 1536);
  EXPECT_EQ(Gauge(kInactiveSplitBytes), 0);
}

TEST_F(FreeSetsTest, ClassicLargeBlocksKeepRemaindersUpToTheSmallSizeLimit) {
  Segment* s = AddSegment(0x10000000, 20 * kMiB, kLarge);
  free_.Take(s->head, 19 * kMiB, 19 * kMiB);
  EXPECT_EQ(s->head->size, 20 * kMiB);  // 1 MiB left: kept with the block.
  EXPECT_FALSE(s->head->split);

  Segment* t = AddSegment(0x20000000, 20 * kMiB, kLarge);
  free_.Take(t->head, 19 * kMiB - 512, 1);
  EXPECT_EQ(t->head->size, 19 * kMiB - 512);
  ASSERT_NE(t->head->next, nullptr);
  EXPECT_EQ(t->head->next->size, kMiB + 512);
}

TEST_F(FreeSetsTest, ExpandableBlocksSplitAtBlockRounding) {
  Segment* s = AddSegment(0x10000000, 20 * kMiB, kLarge, kStreamA, /*expandable=*/true);
  EXPECT_FALSE(free_.fully_free().contains(s));  // Expandable blocks always count as split.
  free_.Take(s->head, 20 * kMiB - 512, 1);
  EXPECT_EQ(s->head->size, 20 * kMiB - 512);
  EXPECT_TRUE(s->head->split);
}

TEST_F(FreeSetsTest, FreeAndMergeJoinsFreeNeighboursAndRecyclesTheirRecords) {
  Segment* s = AddSegment(0x10000000, 2 * kMiB, kSmall);
  Block* a = s->head;
  free_.Take(a, 4096, 4096);
  Block* b = a->next;
  free_.Take(b, 4096, 4096);
  Block* c = b->next;
  free_.Take(c, 4096, 4096);
  Block* tail = c->next;
  ASSERT_NE(tail, nullptr);

  EXPECT_EQ(free_.FreeAndMerge(a), a);  // No free neighbour yet.
  Block* merged = free_.FreeAndMerge(c);  // Merges with the free tail.
  EXPECT_EQ(merged, c);
  EXPECT_EQ(c->size, 2 * kMiB - 8192);
  EXPECT_EQ(c->next, nullptr);
  EXPECT_EQ(free_.LargestFreeBlock(), static_cast<int64_t>(2 * kMiB - 8192));

  const uint64_t b_seq = b->alloc_seq.load();
  merged = free_.FreeAndMerge(b);  // Joins both neighbours into one block.
  EXPECT_EQ(merged, a);
  EXPECT_EQ(a->size, 2 * kMiB);
  EXPECT_EQ(a->next, nullptr);
  EXPECT_TRUE(free_.fully_free().contains(s));
  EXPECT_EQ(Gauge(kInactiveSplitBytes), 0);
  EXPECT_EQ(free_.blocks(kSmall).size(), 1u);
  EXPECT_GT(s->last_used, 0u);

  // Recycled records come back with their alloc_seq still counting.
  Block* again = free_.NewBlock();
  Block* again2 = free_.NewBlock();
  EXPECT_TRUE(again == b || again2 == b);
  EXPECT_EQ(b->alloc_seq.load(), b_seq);
  EXPECT_EQ(b->ptr, nullptr);
  free_.Recycle(again);
  free_.Recycle(again2);
}

TEST_F(FreeSetsTest, MaxSplitSizeKeepsOversizeBlocksForLargeRequests) {
  options_.max_split_size = 4 * kMiB;
  AddSegment(0x10000000, 8 * kMiB, kLarge);
  EXPECT_EQ(free_.FindBestFit(kLarge, kStreamA, 2 * kMiB), nullptr);
  ASSERT_NE(free_.FindBestFit(kLarge, kStreamA, 5 * kMiB), nullptr);
  Block* b = free_.FindBestFit(kLarge, kStreamA, 5 * kMiB);
  free_.Take(b, 5 * kMiB, 1);
  EXPECT_EQ(b->size, 8 * kMiB);  // Above max_split_size: never split.
}

TEST_F(FreeSetsTest, MaxSplitSizeRefusesOversizeBlocksThatWasteALargeSegment) {
  options_.max_split_size = 4 * kMiB;
  AddSegment(0x10000000, 64 * kMiB, kLarge);
  EXPECT_EQ(free_.FindBestFit(kLarge, kStreamA, 5 * kMiB), nullptr);
  EXPECT_NE(free_.FindBestFit(kLarge, kStreamA, 50 * kMiB), nullptr);
}

TEST_F(FreeSetsTest, LargestFreeBlockLooksAtEveryStreamAndPool) {
  EXPECT_EQ(free_.LargestFreeBlock(), 0);
  AddSegment(0x10000000, 2 * kMiB, kSmall, kStreamA);
  AddSegment(0x20000000, 40 * kMiB, kLarge, kStreamA);
  AddSegment(0x80000000, 30 * kMiB, kLarge, kStreamB);
  EXPECT_EQ(free_.LargestFreeBlock(), static_cast<int64_t>(40 * kMiB));
}

}  // namespace
}  // namespace genesis::memory::pool_internal
