#include "genesis/distributed/nccl/one_shot_plan.h"

#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace genesis::distributed::nccl_backend {
namespace {

TEST(OneShotLayoutTest, RoundsToWholeChunksAndKeepsRegionsApart) {
  // Each rank sends its piece to three peers: pieces of up to 100000 bytes, in lines up
  // to kOneShotLineMaxPiece and in bulk beyond.
  absl::StatusOr<OneShotLayout> layout = OneShotLayout::Create(300002, 4);
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->budget(), 300002u);
  EXPECT_EQ(layout->max_piece(), 100000u);
  EXPECT_EQ(layout->max_blocks(), 13u);          // 100000 / 8192 = 12.2.
  // Messages of up to 300002 bytes, in bulk: 300002 / 16384 = 18.3 blocks.
  EXPECT_EQ(layout->max_message_blocks(), 19u);
  // Beyond 2 ranks pieces of up to half kOneShotLineMaxPiece go in lines, and the lines
  // have room for the 16 KiB pieces' small blocks.
  EXPECT_EQ(layout->line_max_piece(), kOneShotLineMaxPiece / 2);
  EXPECT_EQ(layout->line_blocks(), kOneShotSmallPiece / (kOneShotSmallThreads * 16));
  EXPECT_EQ(layout->bulk_blocks(), 13u);
  const size_t lines = layout->line_blocks();
  // A region per block: two 16-byte lines per rank and thread.
  EXPECT_EQ(layout->region_bytes(), 4 * kOneShotThreads * 32);
  EXPECT_EQ(layout->region(0), 0u);
  EXPECT_EQ(layout->region(lines - 1) + layout->region_bytes(), layout->slot_bytes());
  EXPECT_EQ(layout->slot(0), 0u);
  EXPECT_EQ(layout->slot(1), layout->slot_bytes());
  // The epochs after both slots, one word per block of the largest piece.
  EXPECT_EQ(layout->epoch(0), 2 * layout->slot_bytes());
  EXPECT_EQ(layout->epoch(12), layout->epoch(0) + 12 * 4);
  // Then the bulk slots, 16 bytes per rank and thread, and a flag per block and rank.
  EXPECT_GE(layout->bulk_slot(0), layout->epoch(12) + 4);
  EXPECT_EQ(layout->bulk_slot(0) % 256, 0u);
  EXPECT_EQ(layout->bulk_region_bytes(), 4 * kOneShotChunkBytes);
  EXPECT_EQ(layout->bulk_slot_bytes(), 13 * layout->bulk_region_bytes());
  EXPECT_EQ(layout->bulk_slot(1), layout->bulk_slot(0) + layout->bulk_slot_bytes());
  EXPECT_EQ(layout->bulk_flag(0, 0), layout->bulk_slot(1) + layout->bulk_slot_bytes());
  EXPECT_EQ(layout->bulk_flag(0, 3) + 4, layout->bulk_flag(1, 0));
  EXPECT_GE(layout->peer_lines(0, 0, 0), layout->bulk_flag(12, 3) + 4);
  EXPECT_EQ(layout->bytes() % 4096, 0u);
  // Which pieces go in bulk: the same on every rank, from the size and the ranks.
  EXPECT_FALSE(layout->Bulk(kOneShotLineMaxPiece / 2));
  EXPECT_TRUE(layout->Bulk(kOneShotLineMaxPiece / 2 + 1));
  absl::StatusOr<OneShotLayout> two = OneShotLayout::Create(size_t{1} << 20, 2);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_FALSE(two->Bulk(kOneShotLineMaxPiece));
  EXPECT_TRUE(two->Bulk(kOneShotLineMaxPiece + 1));
}

TEST(OneShotLayoutTest, EpochsForEveryBlockOfLinesAndBulk) {
  // Pieces of up to 16 KiB: one block of 512 threads, or eight of 128.
  absl::StatusOr<OneShotLayout> small = OneShotLayout::Create(kOneShotSmallPiece, 2);
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ(small->max_blocks(), 2u);
  EXPECT_EQ(small->line_blocks(), 8u);
  EXPECT_EQ(small->epoch_blocks(), 8u);
  EXPECT_EQ(small->Threads(kOneShotSmallPiece), kOneShotSmallThreads);
  EXPECT_GE(small->bulk_slot(0), small->epoch(7) + 4);
}

TEST(OneShotLayoutTest, NoBulkWhereEveryPieceGoesInLines) {
  absl::StatusOr<OneShotLayout> layout = OneShotLayout::Create(kOneShotLineMaxPiece, 2);
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->bulk_blocks(), 0u);
  EXPECT_EQ(layout->bulk_slot_bytes(), 0u);
  EXPECT_EQ(layout->line_blocks(), layout->max_blocks());
}

TEST(OneShotLayoutTest, KeepsTheSendsAndReceivesApartAfterTheEpochs) {
  // Messages of up to three chunks; collectives' pieces of up to one and a half.
  absl::StatusOr<OneShotLayout> layout = OneShotLayout::Create(3 * kOneShotChunkBytes, 3);
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->max_blocks(), 2u);
  EXPECT_EQ(layout->max_message_blocks(), 3u);
  const size_t lines = OneShotLayout::peer_lines_bytes();
  EXPECT_EQ(lines, kOneShotThreads * 32);
  // After the last epoch, on 256 bytes; every source, slot and block in turn.
  EXPECT_GE(layout->peer_lines(0, 0, 0), layout->epoch(1) + 4);
  EXPECT_EQ(layout->peer_lines(0, 0, 0) % 256, 0u);
  EXPECT_EQ(layout->peer_lines(0, 0, 1), layout->peer_lines(0, 0, 0) + lines);
  EXPECT_EQ(layout->peer_lines(0, 1, 0), layout->peer_lines(0, 0, 2) + lines);
  EXPECT_EQ(layout->peer_lines(1, 0, 0), layout->peer_lines(0, 1, 2) + lines);
  // Then the counts: taken by each peer, sent to each, taken from each, a word per block.
  EXPECT_EQ(layout->taken_by(0, 0), layout->peer_lines(2, 1, 2) + lines);
  EXPECT_EQ(layout->taken_by(0, 1), layout->taken_by(0, 0) + 4);
  EXPECT_EQ(layout->taken_by(1, 0), layout->taken_by(0, 2) + 4);
  EXPECT_EQ(layout->sent_to(0, 0), layout->taken_by(2, 2) + 4);
  EXPECT_EQ(layout->taken_from(0, 0), layout->sent_to(2, 2) + 4);
  // And the flags of messages in bulk from each source.
  EXPECT_EQ(layout->arrived_from(0, 0), layout->taken_from(2, 2) + 4);
  EXPECT_EQ(layout->arrived_from(1, 0), layout->arrived_from(0, 2) + 4);
  EXPECT_GE(layout->bytes(), layout->arrived_from(2, 2) + 4);
  EXPECT_LT(layout->bytes(), layout->arrived_from(2, 2) + 4 + 4096);
  EXPECT_EQ(layout->bytes() % 4096, 0u);
}

TEST(OneShotPeerRoundsTest, EachPeersMessagesInTurn) {
  // Rank 0's batch: send to 1, receive from 1, send to 1, send to 2, receive from 1,
  // send to 1: launch k holds each peer's k-th send and k-th receive.
  const OneShotPeerKey batch[] = {{true, 1}, {false, 1}, {true, 1},
                                  {true, 2}, {false, 1}, {true, 1}};
  int round[6] = {-1, -1, -1, -1, -1, -1};
  EXPECT_EQ(OneShotPeerRounds(batch, absl::MakeSpan(round)), 3);
  EXPECT_EQ(std::vector<int>(round, round + 6), (std::vector<int>{0, 0, 1, 0, 1, 2}));
  // An exchange with each peer: one launch.
  const OneShotPeerKey ring[] = {{true, 1}, {false, 3}, {true, 3}, {false, 1}};
  int one[4];
  EXPECT_EQ(OneShotPeerRounds(ring, absl::MakeSpan(one)), 1);
  EXPECT_EQ(std::vector<int>(one, one + 4), (std::vector<int>{0, 0, 0, 0}));
  EXPECT_EQ(OneShotPeerRounds({}, {}), 0);
}

TEST(OneShotLayoutTest, SmallPiecesRunInSmallBlocksWhereTheyFit) {
  absl::StatusOr<OneShotLayout> layout = OneShotLayout::Create(3 * 65536, 4);
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->Threads(1), kOneShotSmallThreads);
  EXPECT_EQ(layout->Threads(kOneShotSmallPiece), kOneShotSmallThreads);
  EXPECT_EQ(layout->Threads(kOneShotSmallPiece + 1), kOneShotThreads);
  EXPECT_EQ(OneShotLayout::Blocks(kOneShotSmallPiece, kOneShotSmallThreads),
            kOneShotSmallPiece / (kOneShotSmallThreads * 16));
  EXPECT_EQ(OneShotLayout::Blocks(kOneShotSmallPiece + 1), 3u);
  // A window for pieces of one block of 512 threads has its lines' regions for four of
  // 128, so its largest piece runs in those too.
  absl::StatusOr<OneShotLayout> one = OneShotLayout::Create(kOneShotChunkBytes, 2);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->line_blocks(), 4u);
  EXPECT_EQ(one->epoch_blocks(), 4u);
  EXPECT_EQ(one->Threads(kOneShotChunkBytes), kOneShotSmallThreads);
}

TEST(OneShotLayoutTest, ServesWhatARankSendsWithinItsBudget) {
  constexpr OneShotKind kAllReduce = OneShotKind::kAllReduce;
  // Two ranks: a rank sends its piece to its one peer.
  absl::StatusOr<OneShotLayout> two = OneShotLayout::Create(65536, 2);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->max_piece(), 65536u);
  EXPECT_FALSE(two->Serves(kAllReduce, 0));
  EXPECT_TRUE(two->Serves(kAllReduce, 1));
  EXPECT_TRUE(two->Serves(kAllReduce, 65536));
  EXPECT_FALSE(two->Serves(kAllReduce, 65537));
  EXPECT_FALSE(two->ServesMessage(0));
  EXPECT_TRUE(two->ServesMessage(65536));
  EXPECT_FALSE(two->ServesMessage(65537));
  EXPECT_EQ(two->MaxLargest(kAllReduce), 65536u);
  EXPECT_EQ(two->MaxLargest(OneShotKind::kAllGather), 131072u);
  // At 2 ranks all_reduce, broadcast and reduce count as sending what NCCL sends.
  for (OneShotKind kind : {OneShotKind::kBroadcast, OneShotKind::kReduce}) {
    EXPECT_EQ(two->MaxPiece(kind), 65536u) << OneShotKindName(kind);
    EXPECT_TRUE(two->Serves(kind, 65536)) << OneShotKindName(kind);
    EXPECT_FALSE(two->Serves(kind, 65537)) << OneShotKindName(kind);
  }
  // Four ranks: to three peers, so pieces of a third; a message to one peer, the budget.
  absl::StatusOr<OneShotLayout> four = OneShotLayout::Create(3 * 65536 + 2, 4);
  ASSERT_TRUE(four.ok()) << four.status();
  EXPECT_EQ(four->max_piece(), 65536u);
  // All_reduce and broadcast: 4 / 2 of it, in two steps beyond what the one-step slots
  // hold (a rank sends at most 3 / 4 of the buffer in each, as NCCL's ring does in all).
  for (OneShotKind kind : {kAllReduce, OneShotKind::kBroadcast}) {
    EXPECT_TRUE(four->Serves(kind, 131072)) << OneShotKindName(kind);
    EXPECT_FALSE(four->Serves(kind, 131073)) << OneShotKindName(kind);
    EXPECT_EQ(four->MaxLargest(kind), 131072u) << OneShotKindName(kind);
    EXPECT_FALSE(four->TwoStep(kind, 65536)) << OneShotKindName(kind);
    EXPECT_TRUE(four->TwoStep(kind, 65537)) << OneShotKindName(kind);
  }
  // Reduce: 2 / 4 of it, in one step.
  EXPECT_TRUE(four->Serves(OneShotKind::kReduce, 32768));
  EXPECT_FALSE(four->Serves(OneShotKind::kReduce, 32769));
  EXPECT_EQ(four->MaxLargest(OneShotKind::kReduce), 32768u);
  EXPECT_FALSE(four->TwoStep(OneShotKind::kReduce, 65537));
  EXPECT_TRUE(four->ServesMessage(3 * 65536 + 2));
  EXPECT_FALSE(four->ServesMessage(3 * 65536 + 3));
  for (OneShotKind kind :
       {OneShotKind::kAllGather, OneShotKind::kReduceScatter, OneShotKind::kAllToAll}) {
    EXPECT_TRUE(four->Serves(kind, 65536)) << OneShotKindName(kind);
    EXPECT_FALSE(four->Serves(kind, 65537)) << OneShotKindName(kind);
    EXPECT_EQ(four->MaxLargest(kind), 4 * 65536u) << OneShotKindName(kind);
  }
  // Messages up to kOneShotMaxMessage whatever the budget.
  absl::StatusOr<OneShotLayout> large = OneShotLayout::Create(kOneShotMaxBytes, 2);
  ASSERT_TRUE(large.ok()) << large.status();
  EXPECT_EQ(large->max_message(), kOneShotMaxMessage);
  EXPECT_TRUE(large->ServesMessage(kOneShotMaxMessage));
  EXPECT_FALSE(large->ServesMessage(kOneShotMaxMessage + 1));
  EXPECT_TRUE(large->Serves(kAllReduce, kOneShotMaxBytes));
  // A budget below ranks - 1 bytes serves messages but no collective.
  absl::StatusOr<OneShotLayout> tiny = OneShotLayout::Create(6, 8);
  ASSERT_TRUE(tiny.ok()) << tiny.status();
  EXPECT_FALSE(tiny->Serves(kAllReduce, 1));
  EXPECT_TRUE(tiny->ServesMessage(6));
  EXPECT_EQ(tiny->max_blocks(), 0u);
  EXPECT_EQ(tiny->Threads(1), kOneShotThreads);
}

TEST(OneShotKindTest, NamesAndWhichReduce) {
  EXPECT_EQ(OneShotKindName(OneShotKind::kAllReduce), "all_reduce");
  EXPECT_EQ(OneShotKindName(OneShotKind::kReduce), "reduce");
  EXPECT_EQ(OneShotKindName(OneShotKind::kBroadcast), "broadcast");
  EXPECT_EQ(OneShotKindName(OneShotKind::kAllGather), "all_gather");
  EXPECT_EQ(OneShotKindName(OneShotKind::kReduceScatter), "reduce_scatter");
  EXPECT_EQ(OneShotKindName(OneShotKind::kAllToAll), "all_to_all");
  EXPECT_TRUE(OneShotReduces(OneShotKind::kAllReduce));
  EXPECT_TRUE(OneShotReduces(OneShotKind::kReduce));
  EXPECT_TRUE(OneShotReduces(OneShotKind::kReduceScatter));
  EXPECT_FALSE(OneShotReduces(OneShotKind::kBroadcast));
  EXPECT_FALSE(OneShotReduces(OneShotKind::kAllGather));
  EXPECT_FALSE(OneShotReduces(OneShotKind::kAllToAll));
  for (OneShotKind kind : {OneShotKind::kReduceScatter, OneShotKind::kAllToAll}) {
    EXPECT_TRUE(OneShotScatters(kind)) << OneShotKindName(kind);
  }
  for (OneShotKind kind : {OneShotKind::kAllReduce, OneShotKind::kReduce, OneShotKind::kBroadcast,
                           OneShotKind::kAllGather}) {
    EXPECT_FALSE(OneShotScatters(kind)) << OneShotKindName(kind);
  }
  for (OneShotKind kind : {OneShotKind::kAllGather, OneShotKind::kAllToAll}) {
    EXPECT_TRUE(OneShotGathers(kind)) << OneShotKindName(kind);
  }
  for (OneShotKind kind :
       {OneShotKind::kAllGather, OneShotKind::kReduceScatter, OneShotKind::kAllToAll}) {
    EXPECT_TRUE(OneShotSpreads(kind)) << OneShotKindName(kind);
  }
  for (OneShotKind kind :
       {OneShotKind::kAllReduce, OneShotKind::kReduce, OneShotKind::kBroadcast}) {
    EXPECT_FALSE(OneShotSpreads(kind)) << OneShotKindName(kind);
  }
  for (OneShotKind kind : {OneShotKind::kAllReduce, OneShotKind::kReduce, OneShotKind::kBroadcast,
                           OneShotKind::kReduceScatter}) {
    EXPECT_FALSE(OneShotGathers(kind)) << OneShotKindName(kind);
  }
}

TEST(OneShotLayoutTest, BlocksCoverTheMessage) {
  EXPECT_EQ(OneShotLayout::Blocks(1), 1u);
  EXPECT_EQ(OneShotLayout::Blocks(kOneShotChunkBytes), 1u);
  EXPECT_EQ(OneShotLayout::Blocks(kOneShotChunkBytes + 2), 2u);
  EXPECT_EQ(OneShotLayout::Blocks(kOneShotMaxBytes), kOneShotMaxBytes / kOneShotChunkBytes);
  absl::StatusOr<OneShotLayout> exact = OneShotLayout::Create(kOneShotMaxBytes, 8);
  ASSERT_TRUE(exact.ok()) << exact.status();
  EXPECT_EQ(exact->budget(), kOneShotMaxBytes);
  EXPECT_EQ(exact->max_piece(), kOneShotMaxBytes / 7);
  EXPECT_EQ(exact->max_message_blocks(), kOneShotMaxMessage / OneShotLayout::peer_lines_bytes());
}

TEST(OneShotLayoutTest, TwoStepsBeyondTwoRanksInShardsOfTheirOwners) {
  // Where two steps begin: kOneShotStepBytes x ranks / ((ranks - 1)(ranks - 2)).
  for (const auto& [ranks, from] : std::vector<std::pair<int, size_t>>{
           {3, size_t{1152} << 10}, {4, size_t{512} << 10}, {8, 149796}}) {
    absl::StatusOr<OneShotLayout> layout = OneShotLayout::Create(kOneShotMaxBytes, ranks);
    ASSERT_TRUE(layout.ok()) << layout.status();
    EXPECT_EQ(layout->two_step_min_piece(), from) << ranks;
    for (OneShotKind kind : {OneShotKind::kAllReduce, OneShotKind::kBroadcast}) {
      EXPECT_FALSE(layout->TwoStep(kind, from)) << ranks << " " << OneShotKindName(kind);
      EXPECT_TRUE(layout->TwoStep(kind, from + 1)) << ranks << " " << OneShotKindName(kind);
      EXPECT_EQ(layout->MaxPiece(kind), layout->max_piece() * ranks / 2);
    }
    EXPECT_FALSE(layout->TwoStep(OneShotKind::kReduce, from + 1)) << ranks;
    EXPECT_EQ(layout->MaxPiece(OneShotKind::kReduce), layout->max_piece() * 2 / ranks);
  }
  absl::StatusOr<OneShotLayout> four = OneShotLayout::Create(3 * 65536 + 2, 4);
  ASSERT_TRUE(four.ok()) << four.status();
  // Never at 2 ranks, nor for the kinds that send a piece per rank.
  absl::StatusOr<OneShotLayout> two = OneShotLayout::Create(kOneShotMaxBytes, 2);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_FALSE(two->TwoStep(OneShotKind::kAllReduce, kOneShotMaxBytes));
  EXPECT_EQ(two->two_step_min_piece(), 0u);
  EXPECT_EQ(two->two_step_blocks(), 0u);
  EXPECT_EQ(two->two_step_slot_bytes(), 0u);
  for (OneShotKind kind :
       {OneShotKind::kAllGather, OneShotKind::kReduceScatter, OneShotKind::kAllToAll}) {
    EXPECT_FALSE(four->TwoStep(kind, 65536)) << OneShotKindName(kind);
  }
  // Where the one-step slots hold less than two_step_min_piece(), beyond them.
  absl::StatusOr<OneShotLayout> small = OneShotLayout::Create(3 * 4096, 4);
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_FALSE(small->TwoStep(OneShotKind::kAllReduce, 4096));
  EXPECT_TRUE(small->TwoStep(OneShotKind::kAllReduce, 4097));
  EXPECT_TRUE(small->Serves(OneShotKind::kAllReduce, 8192));
  // Shards: one per rank for all_reduce, per rank but the root for broadcast, in whole
  // 16 bytes.
  EXPECT_EQ(four->Owners(OneShotKind::kAllReduce), 4);
  EXPECT_EQ(four->Owners(OneShotKind::kBroadcast), 3);
  EXPECT_EQ(four->Shard(OneShotKind::kAllReduce, 131072), 32768u);
  EXPECT_EQ(four->Shard(OneShotKind::kAllReduce, 131073), 32784u);
  EXPECT_EQ(four->Shard(OneShotKind::kBroadcast, 131072), 43696u);  // 131072 / 3, on 16.
  EXPECT_EQ(four->Shard(OneShotKind::kAllReduce, 17), 16u);
  // Slots for the largest shard (broadcast's): 43696 bytes in 6 blocks, each region the
  // first step's and the second's 16 bytes per rank and thread, after the flags of both
  // steps; the sends' lines after them.
  EXPECT_EQ(four->two_step_blocks(), 6u);
  EXPECT_EQ(four->two_step_region_bytes(), 2 * 4 * kOneShotChunkBytes);
  EXPECT_EQ(four->two_step_slot_bytes(), 6 * four->two_step_region_bytes());
  EXPECT_EQ(four->flag_blocks(), four->bulk_blocks());
  EXPECT_EQ(four->gather_flag(0, 0), four->bulk_flag(four->flag_blocks(), 0));
  EXPECT_EQ(four->gather_flag(1, 0), four->gather_flag(0, 3) + 4);
  EXPECT_GE(four->two_step_slot(0), four->gather_flag(four->flag_blocks(), 0));
  EXPECT_EQ(four->two_step_slot(0) % 256, 0u);
  EXPECT_EQ(four->two_step_slot(1), four->two_step_slot(0) + four->two_step_slot_bytes());
  EXPECT_EQ(four->peer_lines(0, 0, 0), four->two_step_slot(2));
  EXPECT_GE(four->epoch_blocks(), four->two_step_blocks());
  // With no bulk pieces, the flags are the shards' blocks'.
  EXPECT_EQ(small->bulk_blocks(), 0u);
  EXPECT_EQ(small->two_step_blocks(), 1u);
  EXPECT_EQ(small->flag_blocks(), 1u);
}

TEST(OneShotLayoutTest, MessagesBeyondTheLinesGoInBulkBlocksOfTwiceTheData) {
  EXPECT_FALSE(OneShotLayout::MessageBulk(kOneShotLineMaxPiece));
  EXPECT_TRUE(OneShotLayout::MessageBulk(kOneShotLineMaxPiece + 1));
  EXPECT_EQ(OneShotLayout::MessageBlocks(kOneShotLineMaxPiece),
            kOneShotLineMaxPiece / kOneShotChunkBytes);
  // Bulk blocks carry a whole region of peer_lines_bytes() each.
  EXPECT_EQ(OneShotLayout::peer_lines_bytes(), 2 * kOneShotChunkBytes);
  EXPECT_EQ(OneShotLayout::MessageBlocks(kOneShotLineMaxPiece + 1),
            kOneShotLineMaxPiece / (2 * kOneShotChunkBytes) + 1);
  EXPECT_EQ(OneShotLayout::MessageBlocks(kOneShotMaxMessage),
            kOneShotMaxMessage / (2 * kOneShotChunkBytes));
  // A budget just past the lines: regions for the largest message in lines (8), not
  // for its 5 bulk blocks.
  absl::StatusOr<OneShotLayout> past = OneShotLayout::Create(kOneShotLineMaxPiece + 1, 2);
  ASSERT_TRUE(past.ok()) << past.status();
  EXPECT_EQ(past->max_message_blocks(), kOneShotLineMaxPiece / kOneShotChunkBytes);
  EXPECT_TRUE(past->ServesMessage(kOneShotLineMaxPiece + 1));
  EXPECT_FALSE(past->ServesMessage(kOneShotLineMaxPiece + 2));
}

TEST(OneShotLayoutTest, RefusesSizesAndRankCountsItCannotServe) {
  for (int ranks : {-1, 0, 1, kOneShotMaxRanks + 1}) {
    absl::StatusOr<OneShotLayout> layout = OneShotLayout::Create(4096, ranks);
    EXPECT_EQ(layout.status().code(), absl::StatusCode::kInvalidArgument) << ranks;
    EXPECT_NE(layout.status().message().find(std::to_string(ranks) + " ranks"), std::string::npos)
        << layout.status();
  }
  for (size_t bytes : {size_t{0}, kOneShotMaxBytes + 1}) {
    absl::StatusOr<OneShotLayout> layout = OneShotLayout::Create(bytes, 2);
    EXPECT_EQ(layout.status().code(), absl::StatusCode::kInvalidArgument) << bytes;
    EXPECT_NE(layout.status().message().find(std::to_string(bytes)), std::string::npos)
        << layout.status();
  }
}

TEST(OneShotReducesTest, EveryNcclTypeAndReductionButIntegerAverages) {
  for (DType dtype : {DType::kUInt8, DType::kInt8, DType::kInt32, DType::kInt64}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax}) {
      EXPECT_TRUE(OneShotReduces(dtype, op));
    }
    EXPECT_FALSE(OneShotReduces(dtype, ReduceOp::kAvg));
  }
  for (DType dtype : {DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64}) {
    for (ReduceOp op :
         {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kAvg}) {
      EXPECT_TRUE(OneShotReduces(dtype, op));
    }
  }
  EXPECT_FALSE(OneShotReduces(DType::kBool, ReduceOp::kSum));
  EXPECT_FALSE(OneShotReduces(DType::kInt16, ReduceOp::kSum));
}

TEST(OneShotStatsTest, SaysWhatItDoesOrWhyNot) {
  OneShotStats on{true, 524288, 174762, 12, ""};
  EXPECT_EQ(on.ToString(),
            "on, up to 524288 bytes a rank sends (collectives' pieces up to 174762): 12 "
            "operations");
  OneShotStats off;
  off.unavailable = "1 ranks (it serves 2 to 8)";
  EXPECT_EQ(off.ToString(), "off: 1 ranks (it serves 2 to 8)");
}

}  // namespace
}  // namespace genesis::distributed::nccl_backend
