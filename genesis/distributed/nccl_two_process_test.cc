// NCCL groups across two processes forked by the test, one GPU each: every operation
// with known results (batches of messages also by their descriptions), a sub-group, the
// one-shot all_reduce (sizes, alignments, streams, graphs, ranks that disagree), and
// a peer that dies mid-run. Needs 2 GPUs (one test 4); skips otherwise. The parent never
// touches CUDA (a forked child could not use it then).
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "genesis/core/absl_compat.h"
#include "genesis/cuda/device_query.h"
#include "genesis/cuda/graph.h"
#include "genesis/cuda/stream.h"
#include "genesis/distributed/bucketed.h"
#include "genesis/distributed/process_group_factory.h"
#include "genesis/distributed/registration_policy.h"
#ifdef GENESIS_TEST_CUDA_MEMORY
#include "genesis/memory/cuda_virtual_memory.h"
#include "genesis/memory/pool_registry.h"
#endif
#include "genesis/distributed/reducer.h"
#include "genesis/distributed/symmetric_window.h"
#include "genesis/distributed/testing/collective_checks.h"
#include "genesis/distributed/testing/multi_process.h"
#include "gtest/gtest.h"

namespace genesis::distributed {
namespace {

using storage::Storage;
using testing::Check;
using testing::Contribution;
using testing::Expected;
using testing::Filled;
using testing::RankOutcome;

constexpr char kSkip[] = "skip: ";

// `d` times GENESIS_TEST_TIMEOUT_SCALE (a whole number, 1 if unset or not one): under
// compute-sanitizer, where `run_gpu_tests.sh --sanitize` sets it, creating an NCCL group
// alone takes longer than the dead-peer tests' 10 s.
absl::Duration Scaled(absl::Duration d) {
  const char* text = std::getenv("GENESIS_TEST_TIMEOUT_SCALE");
  int scale = 1;
  if (text != nullptr && absl::SimpleAtoi(text, &scale) && scale > 1) return d * scale;
  return d;
}

// The one-shot tests' nccl_one_shot_bytes: not the default, so that they also cover a
// budget a group chooses. At 2 ranks it is the largest all_reduce (and message) of the
// path, at 4 ranks two thirds of it (OneShotLayout::MaxPiece).
constexpr size_t kOneShotTestBytes = size_t{256} << 10;

// Runs body(group) on `ranks` ranks of a fresh NCCL group (rank r on cuda:r) whose
// timeout is Scaled(timeout); `blocking`: GroupOptions::nccl_blocking; `registration`:
// GroupOptions::nccl_registration; `one_shot_bytes`: GroupOptions::nccl_one_shot_bytes;
// `copy_engine_bytes`: GroupOptions::nccl_copy_engine_bytes.
std::vector<RankOutcome> RunNccl(const std::function<std::string(ProcessGroup&)>& body,
                                 absl::Duration timeout = absl::Seconds(60), bool blocking = true,
                                 NcclRegistration registration = NcclRegistration::kAuto,
                                 size_t one_shot_bytes = kDefaultNcclOneShotBytes, int ranks = 2,
                                 size_t copy_engine_bytes = 0) {
  const std::string dir = testing::FreshDirectory("nccl-store");
  return testing::RunRanks(ranks, Scaled(absl::Seconds(180)), [&](int rank) -> std::string {
    if (cuda::DeviceCount() < ranks) {
      return absl::StrCat(kSkip, "needs ", ranks, " CUDA devices, ", cuda::DeviceCount(),
                          " visible");
    }
    auto store = Store::File(dir);
    if (!store.ok()) return std::string(store.status().ToString());
    GroupOptions options;
    options.timeout = Scaled(timeout);
    options.nccl_blocking = blocking;
    options.nccl_registration = registration;
    options.nccl_one_shot_bytes = one_shot_bytes;
    options.nccl_copy_engine_bytes = copy_engine_bytes;
    auto group = CreateNcclGroup(rank, ranks, Device::Cuda(rank), **store, options);
    if (!group.ok()) return std::string(group.status().ToString());
    return body(**group);
  });
}

// RunNccl with the one-shot path off: every operation goes to NCCL.
std::vector<RankOutcome> RunNcclWithoutOneShot(
    const std::function<std::string(ProcessGroup&)>& body) {
  return RunNccl(body, absl::Seconds(60), /*blocking=*/true, NcclRegistration::kAuto,
                 /*one_shot_bytes=*/0);
}

// RunNccl with one-shot operations up to kOneShotTestBytes.
std::vector<RankOutcome> RunNcclOneShot(const std::function<std::string(ProcessGroup&)>& body) {
  return RunNccl(body, absl::Seconds(60), /*blocking=*/true, NcclRegistration::kAuto,
                 kOneShotTestBytes);
}

void ExpectAllOk(const std::vector<RankOutcome>& outcomes) {
  for (const RankOutcome& o : outcomes) {
    if (absl::StartsWith(o.message, kSkip)) GTEST_SKIP() << o.message.substr(sizeof(kSkip) - 1);
  }
  for (const RankOutcome& o : outcomes) EXPECT_TRUE(o.ok()) << o.Describe();
}

// RunNccl among four processes on four GPUs (a test skips on fewer), with one-shot
// operations up to `one_shot_bytes`.
std::vector<RankOutcome> RunNcclOnFourRanks(const std::function<std::string(ProcessGroup&)>& body,
                                            size_t one_shot_bytes) {
  return RunNccl(body, absl::Seconds(60), /*blocking=*/true, NcclRegistration::kAuto,
                 one_shot_bytes, /*ranks=*/4);
}

// "" if `stats` (OneShotStats or CopyEngineStats) count `expected` operations; otherwise
// what they say.
template <typename Stats>
std::string OperationsAre(const absl::StatusOr<Stats>& stats, int64_t expected,
                          std::string_view what) {
  if (!stats.ok()) return std::string(stats.status().ToString());
  if (stats->operations == expected) return std::string();
  return absl::StrCat(ToAbsl(what), " ", stats->ToString(), ", expected ", expected, " operations");
}

// "" if the group has run `expected` one-shot operations so far; otherwise how many.
std::string OneShotOperationsAre(ProcessGroup& group, int64_t expected) {
  return OperationsAre(NcclOneShot(group), expected, "one-shot");
}

std::string EveryOperation(ProcessGroup& group) {
    const int r = group.rank();
    const int n = group.size();
    const Device gpu = group.device();
    // The all_reduces below (4099 elements) take the one-shot path, and so do the
    // all_gather, reduce_scatter, all_to_all, broadcast and reduce.
    GENESIS_ASSIGN_OR_TEXT(one_shot, NcclOneShot(group));
    if (!one_shot.enabled) return absl::StrCat("one-shot all_reduce ", one_shot.ToString());
    int64_t one_shot_operations = one_shot.operations;
    for (DType dtype : {DType::kUInt8, DType::kInt8, DType::kInt32, DType::kInt64,
                        DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                          ReduceOp::kAvg}) {
        if (!CheckReduction(op, dtype).ok()) continue;
        GENESIS_ASSIGN_OR_TEXT(s, Filled(4099, dtype, [&](int64_t i) { return Contribution(op, r, i); }, gpu));
        GENESIS_ASSIGN_OR_TEXT(w, group.AllReduce(s, op));
        GENESIS_RETURN_IF_BAD(w.Wait());
        GENESIS_RETURN_IF_TEXT(Check(s, [&](int64_t i) { return Expected(op, dtype, n, i); },
                                     absl::StrCat("all_reduce ", r)));
        ++one_shot_operations;
      }
    }
    GENESIS_RETURN_IF_TEXT(OneShotOperationsAre(group, one_shot_operations));
    GENESIS_ASSIGN_OR_TEXT(in, Filled(6, DType::kFloat32, [&](int64_t i) { return r * 10 + i; }, gpu));
    GENESIS_ASSIGN_OR_TEXT(out, storage::Zeros({12}, DType::kFloat32, gpu));
    GENESIS_ASSIGN_OR_TEXT(g, group.AllGather(in, out));
    GENESIS_RETURN_IF_BAD(g.Wait());
    GENESIS_RETURN_IF_TEXT(Check(out, [](int64_t i) { return (i / 6) * 10 + i % 6; }, "all_gather"));
    GENESIS_ASSIGN_OR_TEXT(half, storage::Zeros({3}, DType::kFloat32, gpu));
    GENESIS_ASSIGN_OR_TEXT(rs, group.ReduceScatter(in, half, ReduceOp::kSum));
    GENESIS_RETURN_IF_BAD(rs.Wait());
    GENESIS_RETURN_IF_TEXT(Check(half, [&](int64_t i) { return 10 + 2 * (3 * r + i); }, "reduce_scatter"));
    GENESIS_ASSIGN_OR_TEXT(a2a_out, storage::Zeros({6}, DType::kFloat32, gpu));
    GENESIS_ASSIGN_OR_TEXT(a2a, group.AllToAll(in, a2a_out));
    GENESIS_RETURN_IF_BAD(a2a.Wait());
    GENESIS_RETURN_IF_TEXT(Check(a2a_out, [&](int64_t i) { return (i / 3) * 10 + 3 * r + i % 3; }, "all_to_all"));
    GENESIS_ASSIGN_OR_TEXT(b, Filled(5, DType::kBFloat16, [&](int64_t i) { return r + i; }, gpu));
    GENESIS_ASSIGN_OR_TEXT(bw, group.Broadcast(b, 1));
    GENESIS_RETURN_IF_BAD(bw.Wait());
    GENESIS_RETURN_IF_TEXT(Check(b, [](int64_t i) { return 1 + i; }, "broadcast"));
    GENESIS_ASSIGN_OR_TEXT(red, Filled(5, DType::kInt32, [&](int64_t i) { return r + i; }, gpu));
    GENESIS_ASSIGN_OR_TEXT(rw, group.Reduce(red, 0, ReduceOp::kSum));
    GENESIS_RETURN_IF_BAD(rw.Wait());
    GENESIS_RETURN_IF_TEXT(Check(red, [&](int64_t i) { return r == 0 ? 1 + 2 * i : 1 + i; }, "reduce"));
    // All_gather, reduce_scatter, all_to_all, broadcast and reduce took the one-shot path
    // too.
    GENESIS_RETURN_IF_TEXT(OneShotOperationsAre(group, one_shot_operations + 5));
    // Point to point, both directions in one batch.
    GENESIS_ASSIGN_OR_TEXT(mine, Filled(1000, DType::kFloat32, [&](int64_t i) { return r + i; }, gpu));
    GENESIS_ASSIGN_OR_TEXT(theirs, storage::Zeros({1000}, DType::kFloat32, gpu));
    std::vector<StoragePeerOp> ops = {{PeerOp::Kind::kSend, mine, 1 - r, 0},
                                      {PeerOp::Kind::kRecv, theirs, 1 - r, 0}};
    GENESIS_ASSIGN_OR_TEXT(p2p, group.SendRecv(ops));
    const std::string pair = absl::StrCat("batch of 2: send of 1000 x float32 to rank ", 1 - r,
                                          ", recv of 1000 x float32 from rank ", 1 - r, " in ");
    if (!absl::StartsWith(p2p.description(), pair)) {
      return absl::StrCat("described as ", p2p.description(), ", expected ", pair, "...");
    }
    GENESIS_RETURN_IF_BAD(p2p.Wait());
    GENESIS_RETURN_IF_TEXT(Check(theirs, [&](int64_t i) { return 1 - r + i; }, "send/recv"));
    // A batch longer than the two messages its description keeps inline.
    const auto small_of = [](int rank) { return [rank](int64_t i) { return 5 * rank + i; }; };
    GENESIS_ASSIGN_OR_TEXT(small, Filled(7, DType::kInt64, small_of(r), gpu));
    GENESIS_ASSIGN_OR_TEXT(small_in, storage::Zeros({7}, DType::kInt64, gpu));
    GENESIS_RETURN_IF_BAD(theirs.Fill(0));
    ops = {{PeerOp::Kind::kSend, mine, 1 - r, 0},
           {PeerOp::Kind::kSend, small, 1 - r, 0},
           {PeerOp::Kind::kRecv, theirs, 1 - r, 0},
           {PeerOp::Kind::kRecv, small_in, 1 - r, 0}};
    GENESIS_ASSIGN_OR_TEXT(four, group.SendRecv(ops));
    const std::string longer =
        absl::StrCat("batch of 4: send of 1000 x float32 to rank ", 1 - r,
                     ", send of 7 x int64 to rank ", 1 - r, ", recv of 1000 x float32 from rank ",
                     1 - r, ", recv of 7 x int64 from rank ", 1 - r, " in ");
    if (!absl::StartsWith(four.description(), longer)) {
      return absl::StrCat("described as ", four.description(), ", expected ", longer, "...");
    }
    GENESIS_RETURN_IF_BAD(four.Wait());
    const auto received = [&](int64_t i) { return 1 - r + i; };
    GENESIS_RETURN_IF_TEXT(Check(theirs, received, "batch of 4, float32"));
    GENESIS_RETURN_IF_TEXT(Check(small_in, small_of(1 - r), "batch of 4, int64"));
    GENESIS_ASSIGN_OR_TEXT(barrier, group.Barrier());
    GENESIS_RETURN_IF_BAD(barrier.Wait());
    // A sub-group of rank 1 alone.
    GENESIS_ASSIGN_OR_TEXT(sub, group.Split({1}, "one"));
    if ((sub != nullptr) != (r == 1)) return std::string("wrong sub-group membership");
    return std::string();
}

TEST(NcclTwoProcessTest, EveryOperation) { ExpectAllOk(RunNccl(EveryOperation)); }

// Every operation registered (kOn): buffers in one piece of the pool are registered,
// the others copied through the staging area, alike on both ranks' side of NCCL.
TEST(NcclTwoProcessTest, EveryOperationRegistered) {
  ExpectAllOk(RunNccl(EveryOperation, absl::Seconds(60), /*blocking=*/true,
                      NcclRegistration::kOn));
}

#ifdef GENESIS_TEST_CUDA_MEMORY
// Where each piece of the device pool's expandable segments starts, over
// [start, start + bytes).
std::vector<memory::Piece> PiecesOf(const memory::CudaVirtualMemory& vm, const void* start,
                                    size_t bytes) {
  std::vector<memory::Piece> pieces;
  const auto begin = reinterpret_cast<uintptr_t>(start);
  for (uintptr_t p = begin; p < begin + bytes;) {
    std::optional<memory::Piece> piece = vm.PieceContaining(reinterpret_cast<void*>(p));
    if (!piece.has_value()) break;
    pieces.push_back(*piece);
    p = piece->end();
  }
  return pieces;
}

bool InOnePiece(const memory::CudaVirtualMemory& vm, const Storage& s) {
  const std::optional<memory::Piece> piece = vm.PieceContaining(s.data_ptr());
  return piece.has_value() &&
         reinterpret_cast<uintptr_t>(s.data_ptr()) + s.nbytes() <= piece->end();
}

// Registration by default (kAuto) where the ranks' pools place the buffers of one
// all_gather differently: one rank's 16 MiB output lies across two pieces of its pool,
// the other's inside one, then the other way round. The first rank copies its output
// through its staging area, the second works in place: both run the operation
// registered, and both get every rank's part. Operations the policy leaves
// unregistered then run on the same memory (registered on one rank) and stay right.
// One-shot operations are off, so that every size here goes to NCCL.
TEST(NcclTwoProcessTest, RanksWhosePoolsPlaceBuffersDifferentlyAgree) {
  ExpectAllOk(RunNcclWithoutOneShot([](ProcessGroup& group) -> std::string {
    const int r = group.rank();
    const Device gpu = group.device();
    GENESIS_ASSIGN_OR_TEXT(vm, memory::DeviceVirtualMemory(gpu.index()));
    if (vm == nullptr) return absl::StrCat(kSkip, "the device pool has no expandable segments");
    GENESIS_ASSIGN_OR_TEXT(before, NcclBufferRegistration(group));
    if (!before.enabled) return absl::StrCat(kSkip, "registration is off: ", before.ToString());
    constexpr int64_t kHalf = int64_t{2} << 20;    // Floats per rank: 8 MiB; output 16 MiB.
    constexpr int64_t kArena = int64_t{32} << 20;  // 128 MiB of floats.
    GENESIS_ASSIGN_OR_TEXT(arena, storage::Zeros({kArena}, DType::kFloat32, gpu));
    // A piece boundary with 8 MiB of the arena on each side, and a piece of at least
    // 16 MiB inside it (in floats from the arena's start).
    const auto base = static_cast<int64_t>(reinterpret_cast<uintptr_t>(arena.data_ptr()));
    const auto size = static_cast<int64_t>(arena.nbytes());
    int64_t across = -1, inside = -1;
    for (const memory::Piece& piece : PiecesOf(*vm, arena.data_ptr(), arena.nbytes())) {
      const int64_t start = static_cast<int64_t>(piece.start) - base;
      const int64_t end = static_cast<int64_t>(piece.end()) - base;
      if (inside < 0 && start >= 0 && end - start >= 8 * kHalf && end <= size) inside = start / 4;
      if (across < 0 && end >= 4 * kHalf && end + 4 * kHalf <= size) across = end / 4 - kHalf;
    }
    // Both ranks go through every operation whatever they find, so that a rank that
    // fails a check never leaves the other waiting; the problems are reported at the end.
    std::string problems;
    if (across < 0 || inside < 0) {
      absl::StrAppend(&problems, "no piece layout to test in 128 MiB of pool memory (across ",
                      across, ", inside ", inside, "); ");
      across = inside = 0;
    }
    auto part_of_rank = [&](int64_t i) { return r * 1000 + i % 1000; };
    GENESIS_ASSIGN_OR_TEXT(in, Filled(kHalf, DType::kFloat32, part_of_rank, gpu));
    auto gathered = [&](int64_t i) { return (i / kHalf) * 1000 + (i % kHalf) % 1000; };
    int64_t staged = before.staged;
    for (int round = 0; round < 2; ++round) {
      const bool spread = (r + round) % 2 == 0;  // Rank 0 first, then rank 1.
      const int64_t at = spread ? across : inside;
      GENESIS_ASSIGN_OR_TEXT(out, arena.Slice(0, at, at + 2 * kHalf));
      if (InOnePiece(*vm, out) == spread) {
        absl::StrAppend(&problems, "round ", round, ": the output is ",
                        spread ? "in one piece; " : "across pieces; ");
      }
      GENESIS_ASSIGN_OR_TEXT(g, group.AllGather(in, out));
      GENESIS_RETURN_IF_BAD(g.Wait());
      absl::StrAppend(&problems, Check(out, gathered, absl::StrCat("all_gather, round ", round)));
      GENESIS_ASSIGN_OR_TEXT(stats, NcclBufferRegistration(group));
      staged += (InOnePiece(*vm, in) ? 0 : 1) + (spread ? 1 : 0);
      if (stats.staged != staged) {
        absl::StrAppend(&problems, "round ", round, ": ", stats.staged,
                        " buffers staged, expected ", staged, " (", stats.ToString(), "); ");
      }
      // Unregistered operations on the same memory: reduce_scatter and all_reduce.
      GENESIS_ASSIGN_OR_TEXT(part, arena.Slice(0, inside + 2 * kHalf, inside + 3 * kHalf));
      GENESIS_ASSIGN_OR_TEXT(rs, group.ReduceScatter(out, part, ReduceOp::kSum));
      GENESIS_RETURN_IF_BAD(rs.Wait());
      absl::StrAppend(&problems,
                      Check(part, [&](int64_t i) { return 2 * gathered(r * kHalf + i); },
                            absl::StrCat("reduce_scatter, round ", round)));
      GENESIS_ASSIGN_OR_TEXT(ar, group.AllReduce(out, ReduceOp::kMax));
      GENESIS_RETURN_IF_BAD(ar.Wait());
      absl::StrAppend(&problems, Check(out, gathered, absl::StrCat("all_reduce, round ", round)));
      GENESIS_ASSIGN_OR_TEXT(after, NcclBufferRegistration(group));
      if (after.staged != stats.staged || after.hits + after.misses + after.unregistered !=
                                              stats.hits + stats.misses + stats.unregistered) {
        absl::StrAppend(&problems, "round ", round,
                        ": unregistered operations touched the registration: ",
                        after.ToString(), "; ");
      }
    }
    return problems;
  }));
}
// Registered operations copied through the staging area on two streams in turn, one of
// them the legacy default stream, all queued before any is waited for: each waits for
// the area's last use on the other stream (until 2026-11-28 one after a use on the
// legacy default stream did not: its null handle also meant "no use yet"), so every
// output holds its own operation's values. One-shot operations are off, so that every
// size here goes to NCCL.
TEST(NcclTwoProcessTest, StagedOperationsFollowEachOtherAcrossStreams) {
  ExpectAllOk(RunNcclWithoutOneShot([](ProcessGroup& group) -> std::string {
    const int r = group.rank();
    const Device gpu = group.device();
    GENESIS_ASSIGN_OR_TEXT(vm, memory::DeviceVirtualMemory(gpu.index()));
    if (vm == nullptr) return absl::StrCat(kSkip, "the device pool has no expandable segments");
    GENESIS_ASSIGN_OR_TEXT(before, NcclBufferRegistration(group));
    if (!before.enabled) return absl::StrCat(kSkip, "registration is off: ", before.ToString());
    GENESIS_ASSIGN_OR_TEXT(other, cuda::Stream::Create(gpu.index()));
    constexpr int64_t kHalf = int64_t{2} << 20;    // Floats per rank: 8 MiB; output 16 MiB.
    constexpr int64_t kArena = int64_t{32} << 20;  // 128 MiB of floats.
    constexpr int kOperations = 6;
    std::vector<Storage> arenas, ins, outs;
    std::vector<Work> works;
    std::string problems;
    for (int k = 0; k < kOperations; ++k) {
      const storage::StorageOptions on{.stream = k % 2 == 0 ? nullptr : other.native()};
      GENESIS_ASSIGN_OR_TEXT(arena, storage::Zeros({kArena}, DType::kFloat32, gpu, on));
      // Where 16 MiB of the arena lie across a piece boundary (in floats).
      const auto base = static_cast<int64_t>(reinterpret_cast<uintptr_t>(arena.data_ptr()));
      int64_t across = -1;
      for (const memory::Piece& piece : PiecesOf(*vm, arena.data_ptr(), arena.nbytes())) {
        const int64_t end = static_cast<int64_t>(piece.end()) - base;
        if (across < 0 && end >= 4 * kHalf && end + 4 * kHalf <= kArena * 4) {
          across = end / 4 - kHalf;
        }
      }
      if (across < 0) {
        absl::StrAppend(&problems, "operation ", k, ": no piece boundary in the arena; ");
        across = 0;
      }
      GENESIS_ASSIGN_OR_TEXT(out, arena.Slice(0, across, across + 2 * kHalf));
      GENESIS_ASSIGN_OR_TEXT(
          filled,
          Filled(
              kHalf, DType::kFloat32, [&](int64_t i) { return r * 1000 + k * 10 + i % 10; }, gpu));
      GENESIS_ASSIGN_OR_TEXT(in, filled.To(gpu, on));
      arenas.push_back(arena);
      ins.push_back(in);
      outs.push_back(out);
    }
    GENESIS_RETURN_IF_BAD(other.Synchronize());
    GENESIS_RETURN_IF_BAD(ins[0].Synchronize());  // The legacy default stream.
    for (int k = 0; k < kOperations; ++k) {
      GENESIS_ASSIGN_OR_TEXT(w, group.AllGather(ins[k], outs[k]));
      works.push_back(w);
    }
    GENESIS_RETURN_IF_BAD(WaitAll(works));
    for (int k = 0; k < kOperations; ++k) {
      absl::StrAppend(
          &problems,
          Check(
              outs[k], [&](int64_t i) { return (i / kHalf) * 1000 + k * 10 + (i % kHalf) % 10; },
              absl::StrCat("all_gather ", k)));
    }
    GENESIS_ASSIGN_OR_TEXT(after, NcclBufferRegistration(group));
    if (after.staged < before.staged + kOperations) {
      absl::StrAppend(&problems, "expected every output staged: ", after.ToString(), "; ");
    }
    return problems;
  }));
}
#endif  // GENESIS_TEST_CUDA_MEMORY

// Under kAuto a batch of sends and receives decides per message: the two ranks' batches
// hold the same two exchanges in opposite orders, one of 8 MiB (registered) and one of
// 1 MiB (not), so each rank issues a registered group and a plain one. Then all_to_all
// of 8 MiB (registered) and of 1 MiB (not). Every message arrives, and only the
// registered ones touch the registration. One-shot operations are off, so that every
// size here goes to NCCL.
TEST(NcclTwoProcessTest, BatchesMixingRegisteredAndPlainMessagesArrive) {
  ExpectAllOk(RunNcclWithoutOneShot([](ProcessGroup& group) -> std::string {
    const int r = group.rank();
    const int peer = 1 - r;
    const Device gpu = group.device();
    GENESIS_ASSIGN_OR_TEXT(before, NcclBufferRegistration(group));
    if (!before.enabled) return absl::StrCat(kSkip, "registration is off: ", before.ToString());
    constexpr int64_t kBig = int64_t{2} << 20;  // 8 MiB of floats.
    constexpr int64_t kSmall = kBig / 8;        // 1 MiB.
    auto from = [](int rank, int64_t n) {
      return [rank, n](int64_t i) { return rank * 100 + static_cast<double>(i % 97) + n % 7; };
    };
    std::string problems;
    GENESIS_ASSIGN_OR_TEXT(big_out, Filled(kBig, DType::kFloat32, from(r, kBig), gpu));
    GENESIS_ASSIGN_OR_TEXT(small_out, Filled(kSmall, DType::kFloat32, from(r, kSmall), gpu));
    GENESIS_ASSIGN_OR_TEXT(big_in, storage::Zeros({kBig}, DType::kFloat32, gpu));
    GENESIS_ASSIGN_OR_TEXT(small_in, storage::Zeros({kSmall}, DType::kFloat32, gpu));
    std::vector<StoragePeerOp> ops = {{PeerOp::Kind::kSend, big_out, peer, 0},
                                      {PeerOp::Kind::kRecv, small_in, peer, 0},
                                      {PeerOp::Kind::kSend, small_out, peer, 0},
                                      {PeerOp::Kind::kRecv, big_in, peer, 0}};
    if (r == 1) std::reverse(ops.begin(), ops.end());
    GENESIS_ASSIGN_OR_TEXT(p2p, group.SendRecv(ops));
    GENESIS_RETURN_IF_BAD(p2p.Wait());
    absl::StrAppend(&problems, Check(big_in, from(peer, kBig), "8 MiB received"),
                    Check(small_in, from(peer, kSmall), "1 MiB received"));
    GENESIS_ASSIGN_OR_TEXT(after_p2p, NcclBufferRegistration(group));
    const auto registered = [](const nccl_backend::RegistrationStats& s) {
      return s.hits + s.misses + s.unregistered;
    };
    if (registered(after_p2p) != registered(before) + 2) {
      absl::StrAppend(&problems, "the batch registered ",
                      registered(after_p2p) - registered(before),
                      " buffers, expected the two of 8 MiB: ", after_p2p.ToString(), "; ");
    }
    for (const int64_t n : {kBig, kSmall}) {
      // Rank r sends element i of its input to rank i / (n / 2).
      GENESIS_ASSIGN_OR_TEXT(in, Filled(n, DType::kFloat32, from(r, n), gpu));
      GENESIS_ASSIGN_OR_TEXT(out, storage::Zeros({n}, DType::kFloat32, gpu));
      GENESIS_ASSIGN_OR_TEXT(a2a, group.AllToAll(in, out));
      GENESIS_RETURN_IF_BAD(a2a.Wait());
      const int64_t half = n / 2;
      absl::StrAppend(&problems,
                      Check(out,
                            [&](int64_t i) {
                              return from(static_cast<int>(i / half), n)(r * half + i % half);
                            },
                            absl::StrCat("all_to_all of ", n * 4, " bytes")));
    }
    GENESIS_ASSIGN_OR_TEXT(after, NcclBufferRegistration(group));
    if (registered(after) != registered(after_p2p) + 2) {
      absl::StrAppend(&problems, "all_to_all registered ",
                      registered(after) - registered(after_p2p),
                      " buffers, expected the 8 MiB input and output: ", after.ToString(), "; ");
    }
    return problems;
  }));
}

// The Reducer on GPUs: gradients on a stream of their own, separate storages (packed
// buckets) and views of one buffer (in place), marked while later "layers" still run,
// over three steps, with a tapered tail; then the results as the gradients' stream
// sees them.
std::string ReducerOverlapsAndSums(ProcessGroup& group) {
  const int r = group.rank();
  const Device gpu = group.device();
  GENESIS_ASSIGN_OR_TEXT(stream, cuda::Stream::Create(gpu.index()));
  storage::StorageOptions on_stream;
  on_stream.stream = stream.native();
  std::vector<Storage> grads;
  for (int k = 0; k < 30; ++k) {
    GENESIS_ASSIGN_OR_TEXT(
        g, storage::Zeros({1 + (k * 4099) % 70000}, DType::kFloat32, gpu, on_stream));
    grads.push_back(g);
  }
  GENESIS_ASSIGN_OR_TEXT(flat, storage::Zeros({20 * 5000}, DType::kFloat32, gpu, on_stream));
  for (int k = 0; k < 20; ++k) {
    GENESIS_ASSIGN_OR_TEXT(v, flat.Slice(0, 5000 * k, 5000 * (k + 1)));
    grads.push_back(v);
  }
  // A tail tapered from 8 KiB: the last two views get buckets of their own.
  const BucketOptions options{.bucket_bytes = 64 << 10, .last_bucket_bytes = 8 << 10};
  GENESIS_ASSIGN_OR_TEXT(reducer, Reducer::Create(group, grads, ReduceOp::kSum, options));
  const size_t n = grads.size();
  if (reducer->buckets().back().members != std::vector<size_t>{n - 1} ||
      !reducer->buckets().back().in_place) {
    return std::string("the last bucket is not the last view alone, in place");
  }
  for (int step = 0; step < 3; ++step) {
    for (size_t k = 0; k < grads.size(); ++k) {
      GENESIS_ASSIGN_OR_TEXT(values, Filled(
                                         grads[k].numel(), DType::kFloat32,
                                         [&](int64_t i) {
                                           return step + r + static_cast<double>(k % 5) +
                                                  static_cast<double>(i % 4);
                                         },
                                         gpu));
      GENESIS_RETURN_IF_BAD(grads[k].CopyFrom(values));
      GENESIS_RETURN_IF_BAD(reducer->MarkReady(k));
    }
    GENESIS_ASSIGN_OR_TEXT(work, reducer->Finish());
    GENESIS_RETURN_IF_BAD(work.Wait());
    for (size_t k = 0; k < grads.size(); ++k) {
      GENESIS_RETURN_IF_TEXT(Check(
          grads[k],
          [&](int64_t i) {
            return 2.0 * (step + static_cast<double>(k % 5) + static_cast<double>(i % 4)) + 1;
          },
          absl::StrCat("step ", step, ", gradient ", k)));
    }
  }
  return std::string();
}

TEST(NcclTwoProcessTest, ReducerOverlapsAndSums) { ExpectAllOk(RunNccl(ReducerOverlapsAndSums)); }

// Symmetric memory: storages carved from one NCCL window at the same offsets on both
// ranks, reduced and gathered with known results; a storage that does not fit; the
// storages outlive the window's handle.
TEST(NcclTwoProcessTest, SymmetricWindowStorages) {
  ExpectAllOk(RunNccl([](ProcessGroup& group) -> std::string {
    const int r = group.rank();
    const Device gpu = group.device();
    GENESIS_ASSIGN_OR_TEXT(stream, cuda::Stream::Create(gpu.index()));
    GENESIS_ASSIGN_OR_TEXT(window, SymmetricWindow::Create(group, 1 << 20));
    if (window->bytes() != (1 << 20)) return absl::StrCat("window of ", window->bytes());
    GENESIS_ASSIGN_OR_TEXT(small, window->Allocate({2048}, DType::kFloat32, stream.native()));
    GENESIS_ASSIGN_OR_TEXT(half, window->Allocate({32768}, DType::kBFloat16, stream.native()));
    GENESIS_ASSIGN_OR_TEXT(gathered, window->Allocate({2 * 1000}, DType::kFloat32, stream.native()));
    if (window->used() != 8192 + 65536 + 8192) return absl::StrCat("used ", window->used());
    absl::StatusOr<Storage> too_big = window->Allocate({1 << 20}, DType::kFloat32);
    if (too_big.status().code() != absl::StatusCode::kResourceExhausted) {
      return absl::StrCat("too big: ", too_big.status().ToString());
    }
    window.reset();  // The storages keep the memory and its registration.
    for (int round = 0; round < 3; ++round) {
      GENESIS_ASSIGN_OR_TEXT(v1, Filled(2048, DType::kFloat32, [&](int64_t i) { return r + round + i % 7; }, gpu));
      GENESIS_RETURN_IF_BAD(small.CopyFrom(v1));
      GENESIS_ASSIGN_OR_TEXT(w1, group.AllReduce(small, ReduceOp::kSum));
      GENESIS_RETURN_IF_BAD(w1.Wait());
      GENESIS_RETURN_IF_TEXT(Check(small, [&](int64_t i) { return 1 + 2 * (round + i % 7); },
                                   absl::StrCat("symmetric all_reduce, round ", round)));
      GENESIS_ASSIGN_OR_TEXT(v2, Filled(32768, DType::kBFloat16, [&](int64_t i) { return r + i % 3; }, gpu));
      GENESIS_RETURN_IF_BAD(half.CopyFrom(v2));
      GENESIS_ASSIGN_OR_TEXT(w2, group.AllReduce(half, ReduceOp::kSum));
      GENESIS_RETURN_IF_BAD(w2.Wait());
      GENESIS_RETURN_IF_TEXT(Check(half, [&](int64_t i) { return 1 + 2 * (i % 3); },
                                   "symmetric bfloat16 all_reduce"));
      GENESIS_ASSIGN_OR_TEXT(mine, gathered.Slice(0, 1000 * r, 1000 * (r + 1)));
      GENESIS_ASSIGN_OR_TEXT(v3, Filled(1000, DType::kFloat32, [&](int64_t i) { return 10 * r + i; }, gpu));
      GENESIS_RETURN_IF_BAD(mine.CopyFrom(v3));
      GENESIS_ASSIGN_OR_TEXT(w3, group.AllGather(mine, gathered));
      GENESIS_RETURN_IF_BAD(w3.Wait());
      GENESIS_RETURN_IF_TEXT(Check(gathered, [](int64_t i) { return 10 * (i / 1000) + i % 1000; },
                                   "symmetric all_gather"));
    }
    return std::string();
  }));
}

// An all_gather that registration by default would register (16 MiB of output) on
// storages of a symmetric window runs where the window is registered: nothing staged,
// no pool piece registered, and every rank's part arrives.
TEST(NcclTwoProcessTest, LargeAllGatherInASymmetricWindowIsNotStaged) {
  ExpectAllOk(RunNccl([](ProcessGroup& group) -> std::string {
    const int r = group.rank();
    const Device gpu = group.device();
    GENESIS_ASSIGN_OR_TEXT(before, NcclBufferRegistration(group));
    if (!before.enabled) return absl::StrCat(kSkip, "registration is off: ", before.ToString());
    constexpr int64_t kHalf = int64_t{2} << 20;  // 8 MiB of floats per rank.
    GENESIS_ASSIGN_OR_TEXT(window, SymmetricWindow::Create(group, 3 * kHalf * 4));
    GENESIS_ASSIGN_OR_TEXT(in, window->Allocate({kHalf}, DType::kFloat32));
    GENESIS_ASSIGN_OR_TEXT(out, window->Allocate({2 * kHalf}, DType::kFloat32));
    auto part_of_rank = [&](int64_t i) { return r * 1000 + i % 1000; };
    GENESIS_ASSIGN_OR_TEXT(mine, Filled(kHalf, DType::kFloat32, part_of_rank, gpu));
    GENESIS_RETURN_IF_BAD(in.CopyFrom(mine));
    GENESIS_ASSIGN_OR_TEXT(g, group.AllGather(in, out));
    GENESIS_RETURN_IF_BAD(g.Wait());
    auto gathered = [&](int64_t i) { return (i / kHalf) * 1000 + (i % kHalf) % 1000; };
    GENESIS_RETURN_IF_TEXT(Check(out, gathered, "all_gather in a window"));
    GENESIS_ASSIGN_OR_TEXT(after, NcclBufferRegistration(group));
    if (after.staged != before.staged || after.hits + after.misses + after.unregistered !=
                                             before.hits + before.misses + before.unregistered) {
      return absl::StrCat("the window's buffers went through registration: ", after.ToString());
    }
    return std::string();
  }));
}

// The one-shot all_reduce: every dtype and reduction at sizes around its chunks and its
// limit (OneShotLayout::MaxPiece), in lines, in bulk and (beyond 2 ranks, past the
// one-step slots' piece) in two steps, in views that start off 16 bytes, with known
// results; messages one element over the limit run NCCL's all_reduce.
std::string OneShotAtEverySizeAndAlignment(ProcessGroup& group) {
  const int r = group.rank();
  const int n = group.size();
  const Device gpu = group.device();
  GENESIS_ASSIGN_OR_TEXT(before, NcclOneShot(group));
  if (!before.enabled || before.budget != kOneShotTestBytes ||
      before.max_piece != kOneShotTestBytes / static_cast<size_t>(n - 1)) {
    return absl::StrCat("one-shot all_reduce ", before.ToString());
  }
  int64_t expected_operations = before.operations;
  for (DType dtype : {DType::kUInt8, DType::kInt8, DType::kInt32, DType::kInt64, DType::kFloat16,
                      DType::kBFloat16, DType::kFloat32, DType::kFloat64}) {
    const int64_t item = static_cast<int64_t>(ItemSize(dtype));
    // All_reduce's pieces: ranks / 2 times the largest piece (OneShotLayout::MaxPiece).
    const int64_t limit = static_cast<int64_t>(before.max_piece * n / 2) / item;
    const int64_t chunk = 8192 / item;
    for (int64_t count : {int64_t{1}, int64_t{3}, chunk - 1, chunk + 1, 3 * chunk + 5,
                          8 * chunk + 1, limit, limit + 1}) {
      for (int64_t offset : {int64_t{0}, int64_t{1}}) {
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kAvg}) {
          if (!CheckReduction(op, dtype).ok()) continue;
          // The element before the view (offset 1) holds 1, which it must keep.
          const auto value = [&](int64_t i) {
            return i < offset ? 1.0 : Contribution(op, r, i - offset);
          };
          GENESIS_ASSIGN_OR_TEXT(whole, Filled(count + offset, dtype, value, gpu));
          GENESIS_ASSIGN_OR_TEXT(view, whole.Slice(0, offset, offset + count));
          GENESIS_ASSIGN_OR_TEXT(w, group.AllReduce(view, op));
          GENESIS_RETURN_IF_BAD(w.Wait());
          const std::string what =
              absl::StrCat(ToAbsl(DTypeName(dtype)), " ", ToAbsl(ReduceOpName(op)), " of ", count,
                           " at +", offset);
          GENESIS_RETURN_IF_TEXT(Check(
              view, [&](int64_t i) { return Expected(op, dtype, n, i); }, what));
          if (offset == 1) {
            // The element before the view keeps its 1.
            GENESIS_ASSIGN_OR_TEXT(head, whole.Slice(0, 0, 1));
            GENESIS_RETURN_IF_TEXT(Check(
                head, [](int64_t) { return 1; }, what + ", element before"));
          }
          if (count <= limit) ++expected_operations;
        }
      }
    }
  }
  return OneShotOperationsAre(group, expected_operations);
}

TEST(NcclTwoProcessTest, OneShotAllReduceAtEverySizeAndAlignment) {
  ExpectAllOk(RunNcclOneShot(OneShotAtEverySizeAndAlignment));
}

// The same among four processes on four GPUs (skips on fewer).
TEST(NcclTwoProcessTest, OneShotAllReduceAtEverySizeAndAlignmentOnFourRanks) {
  ExpectAllOk(RunNcclOnFourRanks(OneShotAtEverySizeAndAlignment, kOneShotTestBytes));
}

// The one-shot broadcast from every root and reduce to every root at sizes in lines, in
// bulk and (broadcast beyond 2 ranks, past the one-step slots' piece) in two steps, up to
// each one's limit (OneShotLayout::MaxPiece) and one element past it (NCCL's path), in
// views that start off 16 bytes, with known results; the element before the view and,
// for reduce, every rank but the root's buffer keep what they held.
std::string OneShotRootedAtEverySize(ProcessGroup& group) {
  const int r = group.rank();
  const int n = group.size();
  const Device gpu = group.device();
  GENESIS_ASSIGN_OR_TEXT(before, NcclOneShot(group));
  if (!before.enabled || before.max_piece != kOneShotTestBytes / static_cast<size_t>(n - 1)) {
    return absl::StrCat("one-shot ", before.ToString());
  }
  int64_t expected_operations = before.operations;
  for (DType dtype : {DType::kUInt8, DType::kBFloat16, DType::kFloat32, DType::kFloat64}) {
    const int64_t item = static_cast<int64_t>(ItemSize(dtype));
    // Broadcast's pieces reach ranks / 2 times the largest piece, reduce's 2 / ranks.
    const int64_t broadcast_limit = static_cast<int64_t>(before.max_piece * n / 2) / item;
    const int64_t reduce_limit = static_cast<int64_t>(before.max_piece * 2 / n) / item;
    for (bool broadcast : {true, false}) {
      const int64_t limit = broadcast ? broadcast_limit : reduce_limit;
      const int64_t chunk = 8192 / item;
      for (int64_t count : {int64_t{3}, chunk + 1, 9 * chunk + 5, limit - 7, limit, limit + 1}) {
        for (int root = 0; root < n; ++root) {
          const int64_t offset = (root + count) % 2;
          // Values below 100 that every dtype holds exactly, and whose sum over 8 ranks
          // uint8 holds.
          const auto value = [&](int rank, int64_t i) -> double {
            return i < offset ? 1.0 : static_cast<double>((rank * 7 + (i - offset) % 23) % 31);
          };
          GENESIS_ASSIGN_OR_TEXT(
              whole, Filled(
                         count + offset, dtype, [&](int64_t i) { return value(r, i); }, gpu));
          GENESIS_ASSIGN_OR_TEXT(view, whole.Slice(0, offset, offset + count));
          Work w;
          if (broadcast) {
            GENESIS_ASSIGN_OR_TEXT(b, group.Broadcast(view, root));
            w = b;
          } else {
            GENESIS_ASSIGN_OR_TEXT(s, group.Reduce(view, root, ReduceOp::kSum));
            w = s;
          }
          GENESIS_RETURN_IF_BAD(w.Wait());
          const std::string what =
              absl::StrCat(broadcast ? "broadcast" : "reduce", " of ", count, " ",
                           ToAbsl(DTypeName(dtype)), " from root ", root, " at +", offset);
          GENESIS_RETURN_IF_TEXT(Check(
              whole,
              [&](int64_t i) -> double {
                if (i < offset) return 1.0;
                if (broadcast) return value(root, i);
                if (r != root) return value(r, i);
                double sum = 0;
                for (int q = 0; q < n; ++q) sum += value(q, i);
                return sum;
              },
              what));
          if (count <= limit) ++expected_operations;
        }
      }
    }
  }
  return OneShotOperationsAre(group, expected_operations);
}

TEST(NcclTwoProcessTest, OneShotBroadcastAndReduceFromEveryRoot) {
  ExpectAllOk(RunNcclOneShot(OneShotRootedAtEverySize));
}

// The same among four processes on four GPUs (skips on fewer): broadcast in two steps.
TEST(NcclTwoProcessTest, OneShotBroadcastAndReduceFromEveryRootOnFourRanks) {
  ExpectAllOk(RunNcclOnFourRanks(OneShotRootedAtEverySize, kOneShotTestBytes));
}

// Bucketed all_reduce, then broadcast, of 300 packed gradients of uneven sizes (1 KiB
// to 2 MiB) in 1 MiB buckets: runs of packed buckets in one buffer and fewer collectives
// (PackedCollectives) on the collective stream, gradients 100 to 199 on a stream of
// their own and the others on the legacy default stream (their buckets in the same runs,
// each packed and unpacked on its own stream), in-place buckets of one gradient each on
// its stream, three views of one buffer between them. Collectives of every path (NCCL's,
// one-shot) follow each other across the three streams. Every value checked.
std::string BucketedRunsAcrossStreams(ProcessGroup& group) {
  const int r = group.rank();
  const int n = group.size();
  const Device gpu = group.device();
  GENESIS_ASSIGN_OR_TEXT(second, cuda::Stream::Create(gpu.index()));
  const auto value = [](int rank, int k, int64_t i) { return rank + k % 5 + i % 7; };
  std::vector<Storage> grads;
  std::vector<int> ids;  // The gradient's k, or -1 - v for view v.
  GENESIS_ASSIGN_OR_TEXT(flat,
                         Filled(
                             3000, DType::kFloat32, [&](int64_t i) { return r * (i % 100); }, gpu));
  for (int k = 0; k < 300; ++k) {
    if (k == 150) {
      for (int v = 0; v < 3; ++v) {
        GENESIS_ASSIGN_OR_TEXT(view, flat.Slice(0, 1000 * v, 1000 * (v + 1)));
        grads.push_back(view);
        ids.push_back(-1 - v);
      }
    }
    const int64_t count = 256 + (static_cast<int64_t>(k) * 7919) % (512 << 10);
    GENESIS_ASSIGN_OR_TEXT(
        g, Filled(
               count, DType::kFloat32, [&](int64_t i) { return value(r, k, i); }, gpu));
    if (k >= 100 && k < 200) {
      GENESIS_ASSIGN_OR_TEXT(moved, g.To(gpu, {.stream = second.native()}));
      g = moved;
    }
    grads.push_back(g);
    ids.push_back(k);
  }
  GENESIS_RETURN_IF_BAD(second.Synchronize());
  GENESIS_ASSIGN_OR_TEXT(
      work, BucketedAllReduce(group, grads, ReduceOp::kSum, {.bucket_bytes = 1 << 20}));
  GENESIS_RETURN_IF_BAD(work.Wait());
  for (size_t j = 0; j < grads.size(); ++j) {
    GENESIS_RETURN_IF_BAD(grads[j].Synchronize());
    if (ids[j] < 0) continue;
    const int k = ids[j];
    GENESIS_RETURN_IF_TEXT(Check(
        grads[j],
        [&](int64_t i) {
          double sum = 0;
          for (int q = 0; q < n; ++q) sum += value(q, k, i);
          return sum;
        },
        absl::StrCat("all_reduce of gradient ", k)));
  }
  const double ranks_sum = n * (n - 1) / 2.0;
  GENESIS_RETURN_IF_TEXT(Check(
      flat, [&](int64_t i) { return ranks_sum * (i % 100); }, "views, all_reduce"));
  GENESIS_ASSIGN_OR_TEXT(bw, BucketedBroadcast(group, grads, n - 1, {.bucket_bytes = 1 << 20}));
  GENESIS_RETURN_IF_BAD(bw.Wait());
  for (size_t j = 0; j < grads.size(); ++j) {
    GENESIS_RETURN_IF_BAD(grads[j].Synchronize());
    if (ids[j] < 0) continue;
    const int k = ids[j];
    // Every rank held the sum: the root's is the same.
    GENESIS_RETURN_IF_TEXT(Check(
        grads[j],
        [&](int64_t i) {
          double sum = 0;
          for (int q = 0; q < n; ++q) sum += value(q, k, i);
          return sum;
        },
        absl::StrCat("broadcast of gradient ", k)));
  }
  return std::string();
}

TEST(NcclTwoProcessTest, BucketedRunsOfPackedBucketsAcrossStreams) {
  ExpectAllOk(RunNccl(BucketedRunsAcrossStreams));
}

// The same among four processes on four GPUs (skips on fewer).
TEST(NcclTwoProcessTest, BucketedRunsOfPackedBucketsAcrossStreamsOnFourRanks) {
  ExpectAllOk(RunNcclOnFourRanks(BucketedRunsAcrossStreams, kDefaultNcclOneShotBytes));
}

// Many one-shot all_reduces in flight at once on two streams and the legacy default
// stream in turn, each on its own storage with values of its own (a slot read too early
// or too late shows), then the same captured into a CUDA graph and replayed, then again
// on the three streams in turn with every Work dropped at once. (Until 2026-11-28 an
// operation after one on the legacy default stream, whose handle is null, did not wait
// for it: null also meant "no operation before".)
TEST(NcclTwoProcessTest, OneShotAllReducesInFlightAcrossStreamsAndGraphs) {
  ExpectAllOk(RunNcclOneShot([](ProcessGroup& group) -> std::string {
    const int r = group.rank();
    const Device gpu = group.device();
    GENESIS_ASSIGN_OR_TEXT(a, cuda::Stream::Create(gpu.index()));
    GENESIS_ASSIGN_OR_TEXT(b, cuda::Stream::Create(gpu.index()));
    constexpr int kOperations = 40;
    std::vector<Storage> storages;
    std::vector<Work> works;
    for (int k = 0; k < kOperations; ++k) {
      CUstream_st* const streams[] = {a.native(), nullptr, b.native()};  // null: legacy.
      const storage::StorageOptions on{.stream = streams[k % 3]};
      const int64_t count = 1 + (k * 977) % 20000;  // 1 to 20000 floats: 1 to 10 blocks.
      GENESIS_ASSIGN_OR_TEXT(
          x, Filled(
                 count, DType::kFloat32, [&](int64_t i) { return k + r + i % 13; }, gpu));
      GENESIS_ASSIGN_OR_TEXT(y, x.To(gpu, on));
      storages.push_back(y);
    }
    GENESIS_RETURN_IF_BAD(a.Synchronize());
    GENESIS_RETURN_IF_BAD(b.Synchronize());
    for (Storage& s : storages) {
      GENESIS_ASSIGN_OR_TEXT(w, group.AllReduce(s, ReduceOp::kSum));
      works.push_back(w);
    }
    GENESIS_RETURN_IF_BAD(WaitAll(works));
    for (int k = 0; k < kOperations; ++k) {
      GENESIS_RETURN_IF_TEXT(Check(
          storages[k], [&](int64_t i) { return 2 * (k + i % 13) + 1; },
          absl::StrCat("operation ", k)));
    }
    // Captured: five all_reduces of one storage, each doubling it; three replays.
    GENESIS_ASSIGN_OR_TEXT(x, Filled(
                                  3000, DType::kFloat32, [](int64_t i) { return i % 4; }, gpu));
    GENESIS_ASSIGN_OR_TEXT(captured, x.To(gpu, {.stream = a.native()}));
    GENESIS_RETURN_IF_BAD(a.Synchronize());
    GENESIS_ASSIGN_OR_TEXT(before, NcclOneShot(group));
    GENESIS_RETURN_IF_BAD(cuda::BeginCapture(a.native()));
    for (int k = 0; k < 5; ++k) {
      GENESIS_ASSIGN_OR_TEXT(w, group.AllReduce(captured, ReduceOp::kSum));
      if (!w.Done()) return std::string("a captured operation is not done at once");
    }
    GENESIS_ASSIGN_OR_TEXT(graph, cuda::Graph::EndCapture(a.native()));
    for (int replay = 0; replay < 3; ++replay) GENESIS_RETURN_IF_BAD(graph.Launch(a.native()));
    GENESIS_RETURN_IF_BAD(a.Synchronize());
    GENESIS_RETURN_IF_TEXT(Check(
        captured, [](int64_t i) { return (i % 4) * (1 << 15); }, "replays"));
    // Eager ones after the replays, on another stream, still line up.
    GENESIS_ASSIGN_OR_TEXT(eager, group.AllReduce(storages[1], ReduceOp::kMax));
    GENESIS_RETURN_IF_BAD(eager.Wait());
    GENESIS_RETURN_IF_TEXT(Check(
        storages[1], [&](int64_t i) { return 2 * (1 + i % 13) + 1; }, "after"));
    GENESIS_RETURN_IF_TEXT(OneShotOperationsAre(group, before.operations + 6));
    // Each Work dropped at once, the streams in turn: an operation's event comes back
    // before the next one takes one, so the communicator keeps the last one-shot
    // operation's event aside for the next on the other stream to wait for (NCCL's
    // all_reduces beyond the one-shot size in between take events too).
    GENESIS_ASSIGN_OR_TEXT(zeros, storage::Zeros({static_cast<int64_t>(kOneShotTestBytes / 4 + 1)},
                                                 DType::kFloat32, gpu));
    GENESIS_ASSIGN_OR_TEXT(big, zeros.To(gpu, {.stream = b.native()}));
    GENESIS_RETURN_IF_BAD(b.Synchronize());
    for (int k = 0; k < kOperations; ++k) {
      GENESIS_ASSIGN_OR_TEXT(w, group.AllReduce(storages[k], ReduceOp::kSum));
      if (k % 8 == 3) {
        GENESIS_ASSIGN_OR_TEXT(nccl, group.AllReduce(big, ReduceOp::kSum));
      }
    }
    GENESIS_RETURN_IF_BAD(a.Synchronize());
    GENESIS_RETURN_IF_BAD(b.Synchronize());
    for (int k = 0; k < kOperations; ++k) {
      GENESIS_RETURN_IF_TEXT(Check(
          storages[k], [&](int64_t i) { return 2 * (2 * (k + i % 13) + 1); },
          absl::StrCat("dropped operation ", k)));
    }
    GENESIS_RETURN_IF_TEXT(Check(
        big, [](int64_t) { return 0; }, "NCCL's all_reduce"));
    GENESIS_RETURN_IF_TEXT(OneShotOperationsAre(group, before.operations + 6 + kOperations));
    (void)r;
    return std::string();
  }));
}

// Sends and receives up to the one-shot size take the one-shot kernel: exchanges at
// sizes around the chunks and the limit, in views off 1 byte; ten sends queued before
// the peer receives any (each waits for the receive two before); a batch mixing
// one-shot messages with NCCL's (1 MiB); a batch with two messages each way (two
// launches). Every message arrives, and the launches are counted.
TEST(NcclTwoProcessTest, OneShotSendsAndReceives) {
  ExpectAllOk(RunNcclOneShot([](ProcessGroup& group) -> std::string {
    const int r = group.rank();
    const int peer = 1 - r;
    const Device gpu = group.device();
    GENESIS_ASSIGN_OR_TEXT(before, NcclOneShot(group));
    if (!before.enabled) return absl::StrCat("one-shot ", before.ToString());
    // Rank `from`'s k-th message: bytes that differ by sender, message and place.
    const auto message = [](int from, int k) {
      return [=](int64_t i) { return (from * 31 + k * 13 + i) % 251; };
    };
    const auto view = [&](int64_t count, int64_t offset,
                          const std::function<double(int64_t)>& f) -> absl::StatusOr<Storage> {
      GENESIS_ASSIGN_OR_RETURN(Storage whole, Filled(
                                                  count + offset, DType::kUInt8,
                                                  [&](int64_t i) { return f(i - offset); }, gpu));
      return whole.Slice(0, offset, offset + count);
    };
    const auto zero = [](int64_t) { return 0; };
    int64_t launches = 0;
    int k = 0;
    for (const int64_t count : {int64_t{1}, int64_t{17}, int64_t{8192}, int64_t{8195},
                                int64_t{100000}, static_cast<int64_t>(kOneShotTestBytes)}) {
      for (const int64_t offset : {int64_t{0}, int64_t{1}}) {
        GENESIS_ASSIGN_OR_TEXT(out, view(count, offset, message(r, k)));
        GENESIS_ASSIGN_OR_TEXT(in, view(count, offset, zero));
        GENESIS_ASSIGN_OR_TEXT(
            w, group.SendRecv(std::vector<StoragePeerOp>{{PeerOp::Kind::kSend, out, peer, 0},
                                                         {PeerOp::Kind::kRecv, in, peer, 0}}));
        GENESIS_RETURN_IF_BAD(w.Wait());
        GENESIS_RETURN_IF_TEXT(
            Check(in, message(peer, k), absl::StrCat("exchange of ", count, " at +", offset)));
        ++launches;
        ++k;
      }
    }
    // Ten sends from rank 0 before rank 1 receives any, each Work dropped at once.
    std::vector<Storage> stream_of;
    for (int m = 0; m < 10; ++m) {
      const std::function<double(int64_t)> f =
          r == 0 ? std::function<double(int64_t)>(message(0, 100 + m)) : zero;
      GENESIS_ASSIGN_OR_TEXT(s, view(1000 + 997 * m, m % 2, f));
      stream_of.push_back(s);
    }
    if (r == 1) absl::SleepFor(absl::Milliseconds(200));
    for (const Storage& s : stream_of) {
      GENESIS_ASSIGN_OR_TEXT(w, r == 0 ? group.Send(s, 1) : group.Recv(s, 0));
      ++launches;
    }
    GENESIS_RETURN_IF_BAD(cuda::SynchronizeDevice(gpu.index()));
    if (r == 1) {
      for (int m = 0; m < 10; ++m) {
        GENESIS_RETURN_IF_TEXT(
            Check(stream_of[m], message(0, 100 + m), absl::StrCat("queued message ", m)));
      }
    }
    // A batch of a one-shot message and an NCCL one each way (two launches: the one-shot
    // send before NCCL's group, the receive after it), then one of two one-shot messages
    // each way, sends and receives interleaved differently on the two ranks (each
    // peer's k-th send meets its k-th receive, as NCCL's do).
    GENESIS_ASSIGN_OR_TEXT(small_out, view(5000, 0, message(r, 200)));
    GENESIS_ASSIGN_OR_TEXT(small_in, view(5000, 0, zero));
    GENESIS_ASSIGN_OR_TEXT(big_out, view(int64_t{1} << 20, 0, message(r, 201)));
    GENESIS_ASSIGN_OR_TEXT(big_in, view(int64_t{1} << 20, 0, zero));
    const std::vector<StoragePeerOp> mix = {{PeerOp::Kind::kSend, big_out, peer, 0},
                                            {PeerOp::Kind::kSend, small_out, peer, 0},
                                            {PeerOp::Kind::kRecv, small_in, peer, 0},
                                            {PeerOp::Kind::kRecv, big_in, peer, 0}};
    GENESIS_ASSIGN_OR_TEXT(mixed, group.SendRecv(mix));
    GENESIS_RETURN_IF_BAD(mixed.Wait());
    GENESIS_RETURN_IF_TEXT(Check(small_in, message(peer, 200), "one-shot message of a mix"));
    GENESIS_RETURN_IF_TEXT(Check(big_in, message(peer, 201), "NCCL's message of a mix"));
    launches += 2;
    GENESIS_ASSIGN_OR_TEXT(second_out, view(3000, 1, message(r, 202)));
    GENESIS_ASSIGN_OR_TEXT(second_in, view(3000, 1, zero));
    GENESIS_RETURN_IF_BAD(small_in.Fill(0));
    const StoragePeerOp send_first{PeerOp::Kind::kSend, small_out, peer, 0};
    const StoragePeerOp send_second{PeerOp::Kind::kSend, second_out, peer, 0};
    const StoragePeerOp receive_first{PeerOp::Kind::kRecv, small_in, peer, 0};
    const StoragePeerOp receive_second{PeerOp::Kind::kRecv, second_in, peer, 0};
    const std::vector<StoragePeerOp> two =
        r == 0 ? std::vector<StoragePeerOp>{send_first, send_second, receive_first, receive_second}
               : std::vector<StoragePeerOp>{receive_first, send_first, receive_second, send_second};
    GENESIS_ASSIGN_OR_TEXT(pairs, group.SendRecv(two));
    GENESIS_RETURN_IF_BAD(pairs.Wait());
    GENESIS_RETURN_IF_TEXT(Check(small_in, message(peer, 200), "first of two"));
    GENESIS_RETURN_IF_TEXT(Check(second_in, message(peer, 202), "second of two"));
    launches += 2;
    GENESIS_RETURN_IF_TEXT(OneShotOperationsAre(group, before.operations + launches));
    return std::string();
  }));
}

// ---- The copy engines' all_reduce (nccl_communicator.h).

// The copy engines' tests' nccl_copy_engine_bytes.
constexpr size_t kCopyEngineTestBytes = size_t{1} << 20;

// RunNccl with the copy engines' all_reduce from `copy_engine_bytes` on `ranks` ranks;
// `one_shot_bytes` 0 lets it serve small all_reduces too.
std::vector<RankOutcome> RunNcclCopyEngine(const std::function<std::string(ProcessGroup&)>& body,
                                           size_t copy_engine_bytes, int ranks = 2,
                                           size_t one_shot_bytes = kDefaultNcclOneShotBytes) {
  return RunNccl(body, absl::Seconds(60), /*blocking=*/true, NcclRegistration::kAuto,
                 one_shot_bytes, ranks, copy_engine_bytes);
}

// "" if the group's copy engines ran `expected` all_reduces so far; otherwise what.
std::string CopyEngineOperationsAre(ProcessGroup& group, int64_t expected) {
  return OperationsAre(NcclCopyEngine(group), expected, "copy engines");
}

// Every floating dtype at the threshold, across pieces and in a view off one element
// (the additions' unaligned path); five in flight at once; what it does not serve runs
// NCCL's (integers, max, smaller all_reduces); every result known.
std::string CopyEngineAllReduces(ProcessGroup& group) {
  const int r = group.rank();
  const int n = group.size();
  const Device gpu = group.device();
  GENESIS_ASSIGN_OR_TEXT(stats, NcclCopyEngine(group));
  if (!stats.enabled) return absl::StrCat("the copy engines' all_reduce is ", stats.ToString());
  int64_t expected = 0;
  auto view = [&](int64_t count, int64_t offset, DType dtype,
                  ReduceOp op) -> absl::StatusOr<Storage> {
    GENESIS_ASSIGN_OR_RETURN(Storage whole,
                             Filled(
                                 count + offset, dtype,
                                 [&](int64_t i) { return Contribution(op, r, i - offset); }, gpu));
    return whole.Slice(0, offset, offset + count);
  };
  for (DType dtype : {DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64}) {
    const auto per_mib = static_cast<int64_t>((size_t{1} << 20) / ItemSize(dtype));
    for (int64_t count : {per_mib, 16 * per_mib + 1, 40 * per_mib + 3}) {
      for (int64_t offset : {0, 1}) {
        GENESIS_ASSIGN_OR_TEXT(s, view(count, offset, dtype, ReduceOp::kSum));
        GENESIS_ASSIGN_OR_TEXT(w, group.AllReduce(s, ReduceOp::kSum));
        GENESIS_RETURN_IF_BAD(w.Wait());
        ++expected;
        GENESIS_RETURN_IF_TEXT(Check(
            s, [&](int64_t i) { return Expected(ReduceOp::kSum, dtype, n, i); },
            absl::StrCat("copy engines' all_reduce of ", count, " ", ToAbsl(DTypeName(dtype)),
                         " at element ", offset)));
      }
    }
  }
  GENESIS_RETURN_IF_TEXT(CopyEngineOperationsAre(group, expected));
  std::vector<Storage> in_flight;
  std::vector<Work> works;
  for (int k = 0; k < 5; ++k) {
    GENESIS_ASSIGN_OR_TEXT(s, view((3 << 18) + k * 1001, 0, DType::kFloat32, ReduceOp::kSum));
    GENESIS_ASSIGN_OR_TEXT(w, group.AllReduce(s, ReduceOp::kSum));
    in_flight.push_back(s);
    works.push_back(std::move(w));
  }
  for (Work& w : works) GENESIS_RETURN_IF_BAD(w.Wait());
  for (const Storage& s : in_flight) {
    GENESIS_RETURN_IF_TEXT(Check(
        s, [&](int64_t i) { return Expected(ReduceOp::kSum, DType::kFloat32, n, i); },
        "copy engines' all_reduces in flight"));
  }
  expected += 5;
  GENESIS_RETURN_IF_TEXT(CopyEngineOperationsAre(group, expected));
  // Integers, max and all_reduces below the threshold run elsewhere, and right.
  struct Other {
    DType dtype;
    ReduceOp op;
    int64_t count;
  };
  for (const Other& o : {Other{DType::kInt32, ReduceOp::kSum, 1 << 19},
                         Other{DType::kFloat32, ReduceOp::kMax, 1 << 19},
                         Other{DType::kFloat32, ReduceOp::kSum, (1 << 18) - 1}}) {
    GENESIS_ASSIGN_OR_TEXT(s, view(o.count, 0, o.dtype, o.op));
    GENESIS_ASSIGN_OR_TEXT(w, group.AllReduce(s, o.op));
    GENESIS_RETURN_IF_BAD(w.Wait());
    GENESIS_RETURN_IF_TEXT(Check(
        s, [&](int64_t i) { return Expected(o.op, o.dtype, n, i); },
        absl::StrCat(ToAbsl(ReduceOpName(o.op)), " of ", o.count, " ",
                     ToAbsl(DTypeName(o.dtype)))));
  }
  return CopyEngineOperationsAre(group, expected);
}

TEST(NcclTwoProcessTest, CopyEngineAllReduces) {
  ExpectAllOk(RunNcclCopyEngine(CopyEngineAllReduces, kCopyEngineTestBytes));
}

TEST(NcclTwoProcessTest, CopyEngineAllReducesOnFourRanks) {
  ExpectAllOk(RunNcclCopyEngine(CopyEngineAllReduces, kCopyEngineTestBytes, /*ranks=*/4));
}

// The Reducer and packed buckets across streams with every float32 all_reduce on the
// copy engines (the one-shot path off).
TEST(NcclTwoProcessTest, CopyEngineAllReducesUnderTheReducerAndBuckets) {
  ExpectAllOk(RunNcclCopyEngine(
      [](ProcessGroup& group) -> std::string {
        GENESIS_RETURN_IF_TEXT(ReducerOverlapsAndSums(group));
        GENESIS_RETURN_IF_TEXT(BucketedRunsAcrossStreams(group));
        GENESIS_ASSIGN_OR_TEXT(stats, NcclCopyEngine(group));
        if (stats.operations < 10) return absl::StrCat("copy engines ", stats.ToString());
        return std::string();
      },
      /*copy_engine_bytes=*/1, /*ranks=*/2, /*one_shot_bytes=*/0));
}

// Ranks whose options `choose` sets differently: both fail to make the group, saying
// `says`, instead of waiting for each other.
void ExpectRanksThatDisagreeAreRefused(const std::function<void(int, GroupOptions&)>& choose,
                                       std::string_view says) {
  const std::string dir = testing::FreshDirectory("nccl-disagree");
  ExpectAllOk(testing::RunRanks(2, Scaled(absl::Seconds(180)), [&](int rank) -> std::string {
    if (cuda::DeviceCount() < 2) {
      return absl::StrCat(kSkip, "needs 2 CUDA devices, ", cuda::DeviceCount(), " visible");
    }
    auto store = Store::File(dir);
    if (!store.ok()) return std::string(store.status().ToString());
    GroupOptions options;
    options.timeout = Scaled(absl::Seconds(60));
    choose(rank, options);
    auto group = CreateNcclGroup(rank, 2, Device::Cuda(rank), **store, options);
    if (group.ok()) return std::string("made a group whose ranks disagree");
    if (group.status().code() != absl::StatusCode::kInvalidArgument ||
        !absl::StrContains(group.status().message(), ToAbsl(says))) {
      return std::string(group.status().ToString());
    }
    return std::string();
  }));
}

TEST(NcclTwoProcessTest, RanksWithDifferentCopyEngineSizesAreRefused) {
  ExpectRanksThatDisagreeAreRefused(
      [](int rank, GroupOptions& options) {
        options.nccl_copy_engine_bytes = kCopyEngineTestBytes + (rank == 0 ? 0 : 4);
      },
      "different nccl_copy_engine_bytes");
}

TEST(NcclTwoProcessTest, RanksWithDifferentOneShotSizesAreRefused) {
  ExpectRanksThatDisagreeAreRefused(
      [](int rank, GroupOptions& options) {
        options.nccl_one_shot_bytes = rank == 0 ? kOneShotTestBytes : 0;
      },
      "different nccl_one_shot_bytes, from 0 to 262144");
}

// Rank 1 exits after one all_reduce; rank 0's next all_reduce must fail within the
// timeout, naming the operation and the group, and leave the group unusable.
void ExpectDeadPeerBecomesAnError(bool blocking, int64_t count = int64_t{1} << 20,
                                  size_t copy_engine_bytes = 0) {
  const absl::Duration timeout = absl::Seconds(10);
  ExpectAllOk(RunNccl(
      [&](ProcessGroup& group) -> std::string {
        GENESIS_ASSIGN_OR_TEXT(s, storage::Zeros({count}, DType::kFloat32, group.device()));
        GENESIS_ASSIGN_OR_TEXT(first, group.AllReduce(s, ReduceOp::kSum));
        GENESIS_RETURN_IF_BAD(first.Wait());
        if (group.rank() == 1) _exit(0);
        const absl::Time start = absl::Now();
        GENESIS_ASSIGN_OR_TEXT(w, group.AllReduce(s, ReduceOp::kSum));
        absl::Status status = w.Wait();
        if (status.ok()) return std::string("all_reduce with a dead peer succeeded");
        if (absl::Now() - start > Scaled(timeout + absl::Seconds(5))) {
          return absl::StrCat("error after ", absl::FormatDuration(absl::Now() - start));
        }
        if (!absl::StrContains(status.message(), "all_reduce") ||
            !absl::StrContains(status.message(), "nccl group 'world' (rank 0 of 2)")) {
          return std::string("error does not name the operation and group: ") + status.ToString();
        }
        if (group.Barrier().status().code() != absl::StatusCode::kFailedPrecondition) {
          return std::string("the group is still usable after the failure");
        }
        return std::string();
      },
      timeout, blocking, NcclRegistration::kAuto, kDefaultNcclOneShotBytes, /*ranks=*/2,
      copy_engine_bytes));
}

TEST(NcclTwoProcessTest, DeadPeerBecomesAnErrorWithinTheTimeout) {
  ExpectDeadPeerBecomesAnError(/*blocking=*/true);
}

TEST(NcclTwoProcessTest, DeadPeerBecomesAnErrorWithNonBlockingOperations) {
  ExpectDeadPeerBecomesAnError(/*blocking=*/false);
}

// The same in a one-shot all_reduce: the kernel waiting for the dead peer stops when
// the group fails.
TEST(NcclTwoProcessTest, DeadPeerInAOneShotAllReduceBecomesAnError) {
  ExpectDeadPeerBecomesAnError(/*blocking=*/true, /*count=*/1000);
}

// The same in the copy engines' all_reduce: its waits for the dead peer's flags pass
// when the group fails, and the group goes without waiting for the peer.
TEST(NcclTwoProcessTest, DeadPeerInACopyEngineAllReduceBecomesAnError) {
  ExpectDeadPeerBecomesAnError(/*blocking=*/true, /*count=*/int64_t{5} << 20, kCopyEngineTestBytes);
}

}  // namespace
}  // namespace genesis::distributed
