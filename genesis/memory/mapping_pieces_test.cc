#include "genesis/memory/mapping_pieces.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace genesis::memory {
namespace {

constexpr size_t kChunk = size_t{2} << 20;
constexpr uintptr_t kBase = uintptr_t{1} << 40;  // Aligned to any piece size here.

PieceCut Aligned(size_t max_piece, size_t min_piece = 0) {
  return PieceCut{.max_piece = max_piece, .min_piece = min_piece, .layout = PieceLayout::kAligned};
}

PieceCut Whole(size_t max_piece) {
  return PieceCut{.max_piece = max_piece, .layout = PieceLayout::kWhole};
}

std::vector<size_t> Sizes(const std::vector<Piece>& pieces) {
  std::vector<size_t> sizes;
  for (const Piece& p : pieces) sizes.push_back(p.size / kChunk);
  return sizes;
}

TEST(SplitIntoPiecesTest, AlignedRangesTakeTheLargestPieces) {
  EXPECT_EQ(Sizes(SplitIntoPieces(kBase, kBase, 32 * kChunk, kChunk, Aligned(16 * kChunk))),
            (std::vector<size_t>{16, 16}));
  EXPECT_EQ(Sizes(SplitIntoPieces(kBase, kBase, 7 * kChunk, kChunk, Aligned(16 * kChunk))),
            (std::vector<size_t>{4, 2, 1}));
}

TEST(SplitIntoPiecesTest, PiecesAreAlignedToTheirSize) {
  // From chunk 3 to chunk 20: 1 (at 3), 4 (at 4), 8 (at 8), 4 (at 16), 1 (at 20)?
  // At 16 the largest aligned piece that fits in 5 chunks is 4, then 1 at 20.
  const std::vector<Piece> pieces =
      SplitIntoPieces(kBase, kBase + 3 * kChunk, 18 * kChunk, kChunk, Aligned(16 * kChunk));
  EXPECT_EQ(Sizes(pieces), (std::vector<size_t>{1, 4, 8, 4, 1}));
  uintptr_t p = kBase + 3 * kChunk;
  for (const Piece& piece : pieces) {
    EXPECT_EQ(piece.start, p);
    EXPECT_EQ((piece.start - kBase) % piece.size, 0u) << piece.size;
    p += piece.size;
  }
  EXPECT_EQ(p, kBase + 21 * kChunk);
}

TEST(SplitIntoPiecesTest, AlignmentCountsFromTheOrigin) {
  // The same offsets from another origin give the same pieces.
  const uintptr_t origin = kBase + 5 * kChunk;
  EXPECT_EQ(Sizes(SplitIntoPieces(origin, origin + 3 * kChunk, 18 * kChunk, kChunk,
                                  Aligned(16 * kChunk))),
            (std::vector<size_t>{1, 4, 8, 4, 1}));
}

TEST(SplitIntoPiecesTest, ChunkPiecesWhenTheMaximumIsAChunk) {
  EXPECT_EQ(Sizes(SplitIntoPieces(kBase, kBase, 3 * kChunk, kChunk, Aligned(kChunk))),
            (std::vector<size_t>{1, 1, 1}));
}

TEST(SplitIntoPiecesTest, WholePiecesAreAsFewAsFit) {
  // From chunk 3, 18 chunks: 16 and 2 (aligned: 1, 4, 8, 4, 1).
  std::vector<Piece> pieces = SplitIntoPieces(kBase, kBase + 3 * kChunk, 18 * kChunk,
                                              kChunk, Whole(16 * kChunk));
  EXPECT_EQ(Sizes(pieces), (std::vector<size_t>{16, 2}));
  EXPECT_EQ(pieces[0].start, kBase + 3 * kChunk);
  EXPECT_EQ(pieces[1].start, kBase + 19 * kChunk);
  // Below the maximum: one piece of whatever size, power of two or not.
  EXPECT_EQ(Sizes(SplitIntoPieces(kBase, kBase + kChunk, 7 * kChunk, kChunk, Whole(16 * kChunk))),
            (std::vector<size_t>{7}));
  EXPECT_EQ(Sizes(SplitIntoPieces(kBase, kBase, 3 * kChunk, kChunk, Whole(kChunk))),
            (std::vector<size_t>{1, 1, 1}));
}

TEST(SplitIntoPiecesTest, SmallPiecesJoinTheirNeighboursUpToTheMaximum) {
  // From chunk 3, 18 chunks: aligned 1, 4, 8, 4, 1. With pieces of at least 4 chunks,
  // the first joins the second (5) and the last the one before it (5); 8 stays.
  EXPECT_EQ(Sizes(SplitIntoPieces(kBase, kBase + 3 * kChunk, 18 * kChunk, kChunk,
                                  Aligned(16 * kChunk, 4 * kChunk))),
            (std::vector<size_t>{5, 8, 5}));
  // At least 8 chunks: 1 + 4 = 5 is still small, so it takes the 8 (13); 4 + 1 too.
  EXPECT_EQ(Sizes(SplitIntoPieces(kBase, kBase + 3 * kChunk, 18 * kChunk, kChunk,
                                  Aligned(16 * kChunk, 8 * kChunk))),
            (std::vector<size_t>{13, 5}));
  // Never beyond the maximum: with 8-chunk pieces at most, 1 + 4 = 5 cannot take the 8.
  EXPECT_EQ(Sizes(SplitIntoPieces(kBase, kBase + 3 * kChunk, 18 * kChunk, kChunk,
                                  Aligned(8 * kChunk, 8 * kChunk))),
            (std::vector<size_t>{5, 8, 5}));
  // A map smaller than the minimum is one piece; a minimum of a chunk changes nothing.
  EXPECT_EQ(Sizes(SplitIntoPieces(kBase, kBase + 3 * kChunk, 6 * kChunk, kChunk,
                                  Aligned(16 * kChunk, 16 * kChunk))),
            (std::vector<size_t>{6}));
  EXPECT_EQ(Sizes(SplitIntoPieces(kBase, kBase + 3 * kChunk, 18 * kChunk, kChunk,
                                  Aligned(16 * kChunk, kChunk))),
            (std::vector<size_t>{1, 4, 8, 4, 1}));
  // Every piece starts where the one before it ends.
  const std::vector<Piece> pieces = SplitIntoPieces(kBase, kBase + 3 * kChunk, 18 * kChunk,
                                                    kChunk, Aligned(16 * kChunk, 8 * kChunk));
  EXPECT_EQ(pieces[0].start, kBase + 3 * kChunk);
  EXPECT_EQ(pieces[1].start, kBase + 16 * kChunk);
}

TEST(CheckMaxPieceTest, NamesABadSize) {
  EXPECT_TRUE(CheckMaxPiece(kChunk, kChunk, "Map").ok());
  EXPECT_TRUE(CheckMaxPiece(64 * kChunk, kChunk, "Map").ok());
  const absl::Status small = CheckMaxPiece(kChunk / 2, kChunk, "Map");
  EXPECT_EQ(small.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(small.message().find("1048576"), std::string::npos) << small;
  EXPECT_FALSE(CheckMaxPiece(3 * kChunk, kChunk, "Map").ok());
}

class PieceMapTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Chunks 0..7 as 4 + 2 + 1 + 1; nothing at 8; chunk 9 alone.
    map_.Insert(Piece{kBase, 4 * kChunk, 1});
    map_.Insert(Piece{kBase + 4 * kChunk, 2 * kChunk, 2});
    map_.Insert(Piece{kBase + 6 * kChunk, kChunk, 3});
    map_.Insert(Piece{kBase + 7 * kChunk, kChunk, 4});
    map_.Insert(Piece{kBase + 9 * kChunk, kChunk, 7});
  }
  PieceMap map_;
};

TEST_F(PieceMapTest, FindsThePieceOfAnAddress) {
  ASSERT_TRUE(map_.Containing(kBase + 3 * kChunk + 5).has_value());
  EXPECT_EQ(map_.Containing(kBase + 3 * kChunk + 5)->start, kBase);
  EXPECT_EQ(map_.Containing(kBase + 5 * kChunk)->size, 2 * kChunk);
  EXPECT_EQ(map_.Containing(kBase + 9 * kChunk)->handle, 7u);
  EXPECT_FALSE(map_.Containing(kBase + 8 * kChunk).has_value());
  EXPECT_FALSE(map_.Containing(kBase - 1).has_value());
  EXPECT_EQ(map_.BoundsAt(kBase + 5 * kChunk + 1, kChunk),
            std::make_pair(kBase + 4 * kChunk, kBase + 6 * kChunk));
  EXPECT_EQ(map_.BoundsAt(kBase + 8 * kChunk + 1, kChunk),
            std::make_pair(kBase + 8 * kChunk, kBase + 9 * kChunk));  // No piece: the chunk.
  EXPECT_EQ(map_.mapped_bytes(), 9 * kChunk);
}

TEST_F(PieceMapTest, OverlapsSeesPiecesThatStartBefore) {
  EXPECT_TRUE(map_.Overlaps(kBase + 2 * kChunk, kChunk));
  EXPECT_FALSE(map_.Overlaps(kBase + 8 * kChunk, kChunk));
  EXPECT_TRUE(map_.Overlaps(kBase + 8 * kChunk, 2 * kChunk));
}

TEST_F(PieceMapTest, TilingTakesWholePiecesOnly) {
  absl::StatusOr<std::vector<Piece>> tiling = map_.Tiling(kBase + 4 * kChunk, 4 * kChunk, "Unmap");
  ASSERT_TRUE(tiling.ok()) << tiling.status();
  EXPECT_EQ(Sizes(*tiling), (std::vector<size_t>{2, 1, 1}));

  const absl::Status inside = map_.Tiling(kBase + kChunk, kChunk, "Unmap").status();
  EXPECT_EQ(inside.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(inside.message().find("starts inside the mapped piece"), std::string::npos)
      << inside;
  const absl::Status sticks = map_.Tiling(kBase + 4 * kChunk, kChunk, "Unmap").status();
  EXPECT_NE(sticks.message().find("sticks out"), std::string::npos) << sticks;
  const absl::Status gap = map_.Tiling(kBase + 7 * kChunk, 3 * kChunk, "Unmap").status();
  EXPECT_NE(gap.message().find("is not mapped"), std::string::npos) << gap;
}

TEST_F(PieceMapTest, EraseForgetsPieces) {
  ASSERT_TRUE(map_.Erase(kBase + 4 * kChunk).has_value());
  EXPECT_FALSE(map_.Erase(kBase + 4 * kChunk).has_value());
  EXPECT_FALSE(map_.Containing(kBase + 5 * kChunk).has_value());
  EXPECT_EQ(map_.EraseWithin(kBase, 8 * kChunk).size(), 3u);  // 4, 1, 1; not chunk 9.
  EXPECT_EQ(map_.size(), 1u);
  EXPECT_EQ(map_.mapped_bytes(), kChunk);
}

// Writes what it hears as "+start" and "-start" (in chunks from kBase).
class Recorder : public PieceListener {
 public:
  void OnMapped(const Piece& p) override { log += "+" + std::to_string(Chunk(p)); }
  void OnUnmapping(const Piece& p) override { log += "-" + std::to_string(Chunk(p)); }
  static uintptr_t Chunk(const Piece& p) { return (p.start - kBase) / kChunk; }
  std::string log;
};

TEST(PieceListenersTest, EveryListenerHearsEveryPieceInOrder) {
  PieceListeners listeners;
  Recorder a, b;
  listeners.Add(&a);
  listeners.Add(&b);
  listeners.Add(&a);  // Once only.
  EXPECT_EQ(listeners.size(), 2u);
  const std::vector<Piece> pieces = {Piece{kBase, kChunk, 1},
                                     Piece{kBase + 4 * kChunk, 2 * kChunk, 2}};
  listeners.Mapped(pieces);
  listeners.Unmapping({pieces[1]});
  EXPECT_EQ(a.log, "+0+4-4");
  EXPECT_EQ(b.log, "+0+4-4");
  listeners.Remove(&a);
  listeners.Remove(&a);  // Absent: nothing happens.
  listeners.Unmapping({pieces[0]});
  EXPECT_EQ(a.log, "+0+4-4");
  EXPECT_EQ(b.log, "+0+4-4-0");
  EXPECT_EQ(listeners.size(), 1u);
}

// A listener that blocks in OnUnmapping until told to go on.
class Slow : public PieceListener {
 public:
  void OnMapped(const Piece&) override {}
  void OnUnmapping(const Piece&) override {
    inside = true;
    while (!release) std::this_thread::yield();
    inside = false;
    ++calls;
  }
  std::atomic<bool> inside{false};
  std::atomic<bool> release{false};
  std::atomic<int> calls{0};
};

TEST(PieceListenersTest, RemoveWaitsForACallInProgress) {
  PieceListeners listeners;
  Slow slow;
  listeners.Add(&slow);
  std::thread unmapping([&] { listeners.Unmapping({Piece{kBase, kChunk, 1}}); });
  while (!slow.inside) std::this_thread::yield();
  std::atomic<bool> removed{false};
  std::thread remover([&] {
    listeners.Remove(&slow);
    removed = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(removed);  // Still inside the call.
  slow.release = true;
  remover.join();
  unmapping.join();
  EXPECT_TRUE(removed);
  EXPECT_EQ(slow.calls, 1);
  listeners.Unmapping({Piece{kBase, kChunk, 1}});
  EXPECT_EQ(slow.calls, 1);
}

}  // namespace
}  // namespace genesis::memory
