// The copy engines' all_reduce plan: the layout's bounds, and that the chunks of every
// piece tile the buffer, each within a slot, at aligned offsets, whole elements.
#include "genesis/distributed/nccl/copy_engine_plan.h"

#include <set>

#include "gtest/gtest.h"

namespace genesis::distributed::nccl_backend {
namespace {

TEST(CopyEngineLayoutTest, RefusesRanksOutOfRangeAndPiecesTooSmall) {
  for (int ranks : {-1, 0, 1, kCopyEngineMaxRanks + 1}) {
    const auto layout = CopyEngineLayout::Create(ranks, size_t{16} << 20);
    ASSERT_FALSE(layout.ok()) << ranks;
    EXPECT_EQ(layout.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(layout.status().message().find("2 to 8 ranks"), std::string::npos) << layout.status();
  }
  const auto small = CopyEngineLayout::Create(4, 4 * kCopyEngineAlignment - 1);
  ASSERT_FALSE(small.ok());
  EXPECT_EQ(small.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(small.status().message().find("at least 1024 bytes"), std::string::npos)
      << small.status();
}

TEST(CopyEngineLayoutTest, RoundsThePieceAndKeepsSlotsAndFlagsApart) {
  const auto layout = CopyEngineLayout::Create(3, 10000);
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->piece(), 13 * 3 * kCopyEngineAlignment);  // 10000 rounded down to 9984.
  EXPECT_EQ(layout->chunk(), 13 * kCopyEngineAlignment);
  // Two slots per rank, odd pieces in the second set, then the flags.
  std::set<size_t> slots;
  for (uint32_t number : {1u, 2u}) {
    for (int from = 0; from < 3; ++from) {
      const size_t at = layout->SlotOffset(number, from);
      EXPECT_EQ(at % kCopyEngineAlignment, 0u);
      EXPECT_LE(at + layout->chunk(), layout->FlagsOffset());
      slots.insert(at);
    }
  }
  EXPECT_EQ(slots.size(), 6u);
  EXPECT_EQ(layout->SlotOffset(3, 1), layout->SlotOffset(1, 1));
  std::set<size_t> flags;
  for (auto kind : {CopyEngineFlag::kArrived, CopyEngineFlag::kReduced, CopyEngineFlag::kPulled}) {
    for (int from = 0; from < kCopyEngineMaxRanks; ++from) {
      const size_t at = layout->FlagOffset(kind, from);
      EXPECT_GE(at, layout->FlagsOffset());
      EXPECT_LE(at + 4, layout->bytes());
      flags.insert(at);
    }
  }
  EXPECT_EQ(flags.size(), 3u * kCopyEngineMaxRanks);
}

TEST(CopyEngineLayoutTest, ChunksTileEveryPieceAlignedWithinASlot) {
  for (int ranks = 2; ranks <= kCopyEngineMaxRanks; ++ranks) {
    const auto layout =
        CopyEngineLayout::Create(ranks, static_cast<size_t>(ranks) * 4 * kCopyEngineAlignment);
    ASSERT_TRUE(layout.ok()) << layout.status();
    const size_t piece = layout->piece();
    for (size_t element : {2, 4, 8}) {
      for (size_t bytes : {element, 16 * element, piece - element, piece, piece + element,
                           3 * piece + 5 * element, 7 * piece}) {
        EXPECT_EQ(layout->Pieces(bytes), (bytes + piece - 1) / piece);
        size_t next = 0;
        for (size_t k = 0; k < layout->Pieces(bytes); ++k) {
          for (int q = 0; q < ranks; ++q) {
            const CopyEngineChunk c = layout->ChunkOf(bytes, k, q);
            if (c.bytes == 0) continue;
            EXPECT_EQ(c.offset, next) << ranks << " ranks, " << bytes << " bytes, piece " << k;
            EXPECT_EQ((c.offset - k * piece) % kCopyEngineAlignment, 0u);
            EXPECT_LE(c.bytes, layout->chunk());
            EXPECT_EQ(c.bytes % element, 0u);
            next = c.offset + c.bytes;
          }
        }
        EXPECT_EQ(next, bytes) << ranks << " ranks, " << bytes << " bytes";
      }
    }
    EXPECT_EQ(layout->Pieces(0), 0u);
  }
}

TEST(CopyEngineLayoutTest, AFullPieceGivesEveryRankAnEqualChunk) {
  const auto layout = CopyEngineLayout::Create(4, size_t{16} << 20);
  ASSERT_TRUE(layout.ok()) << layout.status();
  for (int q = 0; q < 4; ++q) {
    const CopyEngineChunk c = layout->ChunkOf(size_t{40} << 20, 1, q);
    EXPECT_EQ(c.offset, (size_t{16} << 20) + q * (size_t{4} << 20));
    EXPECT_EQ(c.bytes, size_t{4} << 20);
  }
  // The short last piece: 8 MiB over four ranks.
  EXPECT_EQ(layout->ChunkOf(size_t{40} << 20, 2, 3).bytes, size_t{2} << 20);
}

TEST(CopyEngineStatsTest, SaysWhatItDoesOrWhyNot) {
  CopyEngineStats stats;
  stats.unavailable = "nccl_copy_engine_bytes is 0";
  EXPECT_EQ(stats.ToString(), "off: nccl_copy_engine_bytes is 0");
  stats.enabled = true;
  stats.min_bytes = 1 << 20;
  stats.piece = 16 << 20;
  stats.operations = 3;
  EXPECT_EQ(stats.ToString(), "on from 1048576 bytes (pieces of 16777216): 3 all_reduces");
}

TEST(CopyEngineReducesTest, SumsOfFloatingTypesOnly) {
  for (DType dtype : kAllDTypes) {
    const bool floating = dtype == DType::kFloat16 || dtype == DType::kBFloat16 ||
                          dtype == DType::kFloat32 || dtype == DType::kFloat64;
    EXPECT_EQ(CopyEngineReduces(dtype, ReduceOp::kSum), floating) << DTypeName(dtype);
    for (ReduceOp op : {ReduceOp::kProd, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kAvg}) {
      EXPECT_FALSE(CopyEngineReduces(dtype, op)) << DTypeName(dtype);
    }
  }
}

}  // namespace
}  // namespace genesis::distributed::nccl_backend
