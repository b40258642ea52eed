#include "genesis/memory/pool/expandable_segments.h"

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "genesis/memory/allocator_options.h"
#include "genesis/memory/pool/block.h"
#include "genesis/memory/pool/free_sets.h"
#include "genesis/memory/pool/oom_message.h"
#include "genesis/memory/pool/pool_events.h"
#include "genesis/memory/pool/pool_stats.h"
#include "genesis/memory/pool/segment_map.h"
#include "genesis/memory/pool/stat_index.h"
#include "genesis/memory/pool/segment_test_base.h"
#include "genesis/memory/test_backend.h"

namespace genesis::memory::pool_internal {
namespace {

constexpr size_t kChunk = 64 * 1024;
constexpr StreamId kStream = 3;

// Expandable segments over a TestBackend's virtual memory, with 64 KiB chunks.
class ExpandableSegmentSetTest : public SegmentTestBase {
 protected:
  ExpandableSegmentSetTest() {
    TestBackend::Options o;
    o.virtual_memory = true;
    o.granularity = kChunk;
    o.total_bytes = 64 * kMiB;
    backend_ = std::make_unique<TestBackend>(o);
  }
  ~ExpandableSegmentSetTest() override {
    for (auto& [addr, s] : segments_) {
      set_->Destroy(s);
      DeleteSegmentRecords(s);
    }
  }
  // Pieces of one chunk unless `max_piece` says otherwise.
  void Make(size_t allowed_max = kNoLimit, size_t max_piece = kChunk,
            PieceLayout layout = PieceLayout::kAligned) {
    set_ = std::make_unique<ExpandableSegmentSet>(*backend_, *backend_->virtual_memory(),
                                                  64 * kMiB,
                                                  PieceCut{.max_piece = max_piece,
                                                           .layout = layout},
                                                  free_, segments_, stats_, allowed_max);
  }

  std::unique_ptr<TestBackend> backend_;
  std::unique_ptr<ExpandableSegmentSet> set_;
};

TEST(ExpandableReservationTest, RangesHoldTheBackendsMemoryAndAnEighth) {
  EXPECT_EQ(ExpandableSegmentSet::ReservationSize(64 * kMiB, kChunk), 72 * kMiB);
  EXPECT_EQ(ExpandableSegmentSet::ReservationSize(0, kChunk), size_t{256} << 30);
  EXPECT_EQ(ExpandableSegmentSet::ReservationSize(size_t{1} << 40, kChunk), size_t{256} << 30);
  EXPECT_EQ(ExpandableSegmentSet::ReservationSize(1000, 512), 1536u);
  EXPECT_EQ(ExpandableSegmentSet::ReservationSize(1000, 0), 0u);
}

TEST_F(ExpandableSegmentSetTest, ExpandReservesARangeAndMapsWholeChunks) {
  Make();
  OomReason why;
  Sink sink;
  absl::StatusOr<Block*> b = set_->Expand(100 * 1024, kStream, &sink, &why);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->size, 2 * kChunk);
  EXPECT_EQ((*b)->state.load(), State::kFree);
  EXPECT_TRUE((*b)->segment->expandable);
  EXPECT_EQ((*b)->segment->size, 72 * kMiB);
  EXPECT_EQ(segments_.size(), 1u);
  EXPECT_EQ(Reserved(), static_cast<int64_t>(2 * kChunk));
  EXPECT_EQ(segments_.high_water(), static_cast<int64_t>(2 * kChunk));
  EXPECT_EQ(backend_->state()->mapped_bytes(), 2 * kChunk);
  ASSERT_EQ(sink.size(), 1u);
  EXPECT_EQ(sink[0].type, AllocatorEventType::kSegmentMap);
  // The rest of the range is one unmapped block after it.
  ASSERT_NE((*b)->next, nullptr);
  EXPECT_EQ((*b)->next->state.load(), State::kUnmapped);
  EXPECT_EQ((*b)->next->size, 72 * kMiB - 2 * kChunk);
}

TEST_F(ExpandableSegmentSetTest, GrowthExtendsTheFreeBlockAtTheEndOfTheMappedPart) {
  Make();
  OomReason why;
  Block* b = *set_->Expand(100 * 1024, kStream, nullptr, &why);
  free_.Take(b, 100 * 1024, 100 * 1024);  // 28 KiB stay free after it.
  Block* grown = *set_->Expand(92 * 1024, kStream, nullptr, &why);
  // One more chunk is enough next to the 28 KiB.
  EXPECT_EQ(grown->ptr, b->ptr + 100 * 1024);
  EXPECT_EQ(grown->size, 28 * 1024 + kChunk);
  EXPECT_EQ(Reserved(), static_cast<int64_t>(3 * kChunk));
  EXPECT_EQ(segments_.size(), 1u);
}

TEST_F(ExpandableSegmentSetTest, IdleChunksAreUnmappedAndEmptyRangesGivenBack) {
  Make();
  OomReason why;
  Block* b = *set_->Expand(4 * kChunk, kStream, nullptr, &why);
  Block* head = b->segment->head;
  Sink sink;
  EXPECT_EQ(set_->UnmapIdleChunks(kChunk, [] { return false; }, {}, false, &sink), kChunk);
  EXPECT_EQ(Reserved(), static_cast<int64_t>(3 * kChunk));
  ASSERT_EQ(sink.size(), 1u);
  EXPECT_EQ(sink[0].type, AllocatorEventType::kSegmentUnmap);
  // Blocks to keep are left alone.
  EXPECT_EQ(set_->UnmapIdleChunks(kNoLimit, [] { return false; }, {head}, false, nullptr), 0u);
  EXPECT_EQ(set_->UnmapIdleChunks(kNoLimit, [] { return false; }, {}, false, nullptr),
            3 * kChunk);
  EXPECT_EQ(Reserved(), 0);
  EXPECT_EQ(backend_->state()->mapped_bytes(), 0u);
  // Now one unmapped block spans the range, which goes back.
  EXPECT_EQ(head->state.load(), State::kUnmapped);
  EXPECT_EQ(head->next, nullptr);
  set_->ReleaseEmptyRanges();
  EXPECT_EQ(segments_.size(), 0u);
  EXPECT_EQ(backend_->state()->live_reservations(), 0);
}

TEST_F(ExpandableSegmentSetTest, BeyondTheHighWaterMarkMemoryMovesInsteadOfGrowing) {
  Make();
  OomReason why;
  Block* a = *set_->Expand(2 * kChunk, kStream, nullptr, &why);
  free_.Take(a, 2 * kChunk, 1);
  Block* b = *set_->Expand(2 * kChunk, kStream, nullptr, &why);
  free_.Take(b, 2 * kChunk, 1);
  EXPECT_EQ(segments_.high_water(), static_cast<int64_t>(4 * kChunk));
  free_.FreeAndMerge(a);  // 2 chunks free at the start.
  Block* c = *set_->Expand(2 * kChunk, kStream + 1, nullptr, &why);  // Another stream.
  EXPECT_EQ(c->size, 2 * kChunk);
  EXPECT_EQ(Reserved(), static_cast<int64_t>(4 * kChunk));  // a's chunks moved to c.
  EXPECT_EQ(segments_.size(), 2u);
}

TEST_F(ExpandableSegmentSetTest, MemoryGoesBackAWholePieceAtATimeNeverMoreThanAsked) {
  Make(kNoLimit, /*max_piece=*/4 * kChunk);
  OomReason why;
  // 6 chunks from the range's start: a piece of 4 chunks, then one of 2.
  Block* b = *set_->Expand(6 * kChunk, kStream, nullptr, &why);
  ASSERT_EQ(b->size, 6 * kChunk);
  EXPECT_EQ(set_->UnmapIdleChunks(kChunk, [] { return false; }, {}, false, nullptr), 0u);
  EXPECT_EQ(set_->UnmapIdleChunks(3 * kChunk, [] { return false; }, {}, false, nullptr),
            2 * kChunk);
  EXPECT_EQ(Reserved(), static_cast<int64_t>(4 * kChunk));
  EXPECT_EQ(set_->UnmapIdleChunks(kNoLimit, [] { return false; }, {}, false, nullptr),
            4 * kChunk);
  EXPECT_EQ(backend_->state()->mapped_bytes(), 0u);
}

TEST_F(ExpandableSegmentSetTest, MakingRoomUnmapsAtLeastWhatIsAskedInWholePieces) {
  Make(kNoLimit, /*max_piece=*/4 * kChunk);
  OomReason why;
  Sink sink;
  // 6 chunks from the range's start: a piece of 4 chunks, then one of 2; and a block in
  // use after them, which keeps its memory.
  Block* b = *set_->Expand(6 * kChunk, kStream, nullptr, &why);
  ASSERT_EQ(b->size, 6 * kChunk);
  free_.Take(b, 6 * kChunk, 1);
  Block* used = *set_->Expand(kChunk, kStream, nullptr, &why);
  free_.Take(used, kChunk, 1);
  free_.FreeAndMerge(b);
  EXPECT_EQ(Reserved(), static_cast<int64_t>(7 * kChunk));
  // A chunk's room takes the last piece of the free block (2 chunks), remembered as
  // moved away: mapping it again raises the mark.
  EXPECT_EQ(set_->MakeRoom(kChunk, &sink), 2 * kChunk);
  ASSERT_EQ(sink.size(), 1u);
  EXPECT_EQ(sink[0].type, AllocatorEventType::kSegmentUnmap);
  EXPECT_EQ(sink[0].size, 2 * kChunk);
  // Three chunks' room takes the 4-chunk piece too; then nothing idle is left.
  EXPECT_EQ(set_->MakeRoom(3 * kChunk, nullptr), 4 * kChunk);
  EXPECT_EQ(set_->MakeRoom(kChunk, nullptr), 0u);
  EXPECT_EQ(Reserved(), static_cast<int64_t>(kChunk));
  EXPECT_EQ(backend_->state()->mapped_bytes(), kChunk);
  EXPECT_EQ(segments_.high_water(), static_cast<int64_t>(7 * kChunk));
  b = *set_->Expand(6 * kChunk, kStream, nullptr, &why);
  EXPECT_EQ(Reserved(), static_cast<int64_t>(7 * kChunk));
  EXPECT_EQ(segments_.high_water(), static_cast<int64_t>(7 * kChunk));
  EXPECT_EQ(backend_->state()->mapped_bytes(), 7 * kChunk);
}

TEST_F(ExpandableSegmentSetTest, WholePiecesTakeOnePerMapAndGoBackWhole) {
  Make(kNoLimit, /*max_piece=*/4 * kChunk, PieceLayout::kWhole);
  const VirtualMemory& vm = *backend_->virtual_memory();
  OomReason why;
  Block* a = *set_->Expand(3 * kChunk, kStream, nullptr, &why);
  free_.Take(a, 3 * kChunk, 1);
  const auto start = reinterpret_cast<uintptr_t>(a->ptr);
  auto chunks = [&](uintptr_t p) {  // A piece's bounds, in chunks from the start.
    const auto [begin, end] = vm.PieceAt(p);
    return std::make_pair((begin - start) / kChunk, (end - start) / kChunk);
  };
  // One piece of 3 chunks (aligned: 2 and 1).
  EXPECT_EQ(chunks(start), std::make_pair(uintptr_t{0}, uintptr_t{3}));
  // 6 more from chunk 3: 4 and 2 (aligned: 1, 4 and 1).
  Block* b = *set_->Expand(6 * kChunk, kStream, nullptr, &why);
  free_.Take(b, 6 * kChunk, 1);
  EXPECT_EQ(chunks(start + 3 * kChunk), std::make_pair(uintptr_t{3}, uintptr_t{7}));
  EXPECT_EQ(chunks(start + 7 * kChunk), std::make_pair(uintptr_t{7}, uintptr_t{9}));
  EXPECT_EQ(backend_->state()->map_calls(), 2);
  // Memory goes back a whole piece at a time, never more than asked: b's pieces are 4
  // and 2 chunks.
  free_.FreeAndMerge(b);
  EXPECT_EQ(set_->UnmapIdleChunks(kChunk, [] { return false; }, {}, false, nullptr), 0u);
  EXPECT_EQ(set_->UnmapIdleChunks(3 * kChunk, [] { return false; }, {}, false, nullptr),
            2 * kChunk);
  EXPECT_EQ(set_->UnmapIdleChunks(4 * kChunk, [] { return false; }, {}, false, nullptr),
            4 * kChunk);
  EXPECT_EQ(Reserved(), static_cast<int64_t>(3 * kChunk));
  EXPECT_EQ(backend_->state()->mapped_bytes(), 3 * kChunk);
}

TEST_F(ExpandableSegmentSetTest, MappingAgainWhatWasMovedAwayRaisesTheMarkInstead) {
  Make();
  OomReason why;
  Block* a = *set_->Expand(2 * kChunk, kStream, nullptr, &why);
  free_.Take(a, 2 * kChunk, 1);
  Block* b = *set_->Expand(2 * kChunk, kStream, nullptr, &why);
  free_.Take(b, 2 * kChunk, 1);
  char* a_ptr = a->ptr;
  free_.FreeAndMerge(a);
  // At the mark: a's memory moves to another stream.
  Block* c = *set_->Expand(2 * kChunk, kStream + 1, nullptr, &why);
  free_.Take(c, 2 * kChunk, 1);
  EXPECT_EQ(Reserved(), static_cast<int64_t>(4 * kChunk));
  free_.FreeAndMerge(c);
  // Mapping a's place again would move c's memory back: the mark rises instead.
  Block* again = *set_->Expand(2 * kChunk, kStream, nullptr, &why);
  EXPECT_EQ(again->ptr, a_ptr);
  EXPECT_EQ(Reserved(), static_cast<int64_t>(6 * kChunk));
  EXPECT_EQ(segments_.high_water(), static_cast<int64_t>(6 * kChunk));
}

TEST_F(ExpandableSegmentSetTest, MemoryFractionCapStopsMapping) {
  Make(/*allowed_max=*/kChunk);
  OomReason why;
  absl::StatusOr<Block*> b = set_->Expand(2 * kChunk, kStream, nullptr, &why);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(why.limit_hit);
  EXPECT_EQ(Reserved(), 0);
}

}  // namespace
}  // namespace genesis::memory::pool_internal
