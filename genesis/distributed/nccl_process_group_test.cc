// NCCL groups within one process: a one-rank world on cuda:0 runs every operation, and
// bad input is refused; buffers in pieces of the device pool's expandable segments are
// registered with NCCL once and deregistered before the pool unmaps them. Skips without
// a GPU; in a build without NCCL it checks that every entry point says so.
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "genesis/cuda/graph.h"
#include "genesis/cuda/stream.h"
#include "genesis/cuda/test_util.h"
#include "genesis/distributed/bucketed.h"
#include "genesis/distributed/process_group.h"
#include "genesis/distributed/process_group_factory.h"
#include "genesis/distributed/reducer.h"
#include "genesis/distributed/registration_policy.h"
#include "genesis/distributed/testing/collective_checks.h"
#include "genesis/memory/memory_api.h"
#include "genesis/memory/pool_registry.h"
#include "gtest/gtest.h"

namespace genesis::distributed {
namespace {

using storage::Storage;
using testing::Check;
using testing::Filled;

std::unique_ptr<ProcessGroup> OneRankWorld(bool blocking = true,
                                           NcclRegistration registration = NcclRegistration::kOn) {
  auto id = NewNcclUniqueId();
  EXPECT_TRUE(id.ok()) << id.status();
  if (!id.ok()) return nullptr;
  GroupOptions options;
  options.timeout = absl::Seconds(30);
  options.nccl_blocking = blocking;
  options.nccl_registration = registration;
  auto group = CreateNcclGroup(0, 1, Device::Cuda(0), *id, options);
  EXPECT_TRUE(group.ok()) << group.status();
  return group.ok() ? *std::move(group) : nullptr;
}

std::string RunEveryOperation(ProcessGroup& group) {
  const Device gpu = group.device();
  for (DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kFloat16, DType::kInt64}) {
    GENESIS_ASSIGN_OR_TEXT(s, Filled(1 << 20, dtype, [](int64_t i) { return i % 7; }, gpu));
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kAvg}) {
      if (!CheckReduction(op, dtype).ok()) continue;
      GENESIS_ASSIGN_OR_TEXT(w, group.AllReduce(s, op));
      GENESIS_RETURN_IF_BAD(w.Wait());
    }
    GENESIS_RETURN_IF_TEXT(Check(s, [](int64_t i) { return i % 7; }, "all_reduce of one rank"));
  }
  GENESIS_ASSIGN_OR_TEXT(in, Filled(1000, DType::kFloat32, [](int64_t i) { return i; }, gpu));
  GENESIS_ASSIGN_OR_TEXT(out, storage::Zeros({1000}, DType::kFloat32, gpu));
  GENESIS_ASSIGN_OR_TEXT(g, group.AllGather(in, out));
  GENESIS_RETURN_IF_BAD(g.Wait());
  GENESIS_RETURN_IF_TEXT(Check(out, [](int64_t i) { return i; }, "all_gather"));
  GENESIS_ASSIGN_OR_TEXT(rs, group.ReduceScatter(in, out, ReduceOp::kSum));
  GENESIS_ASSIGN_OR_TEXT(a2a, group.AllToAll(in, out));
  GENESIS_ASSIGN_OR_TEXT(b, group.Broadcast(in, 0));
  GENESIS_ASSIGN_OR_TEXT(r, group.Reduce(in, 0, ReduceOp::kMin));
  GENESIS_ASSIGN_OR_TEXT(barrier, group.Barrier());
  GENESIS_RETURN_IF_BAD(WaitAll({rs, a2a, b, r, barrier}));
  GENESIS_RETURN_IF_TEXT(Check(out, [](int64_t i) { return i; }, "all_to_all"));
  // Bucketed: 300 gradients, some as views of one buffer.
  std::vector<Storage> grads;
  for (int k = 0; k < 300; ++k) {
    GENESIS_ASSIGN_OR_TEXT(x, Filled(1 + k * 13, DType::kFloat32, [&](int64_t) { return k % 9; }, gpu));
    grads.push_back(x);
  }
  GENESIS_ASSIGN_OR_TEXT(work, BucketedAllReduce(group, grads, ReduceOp::kSum, {.bucket_bytes = 64 << 10}));
  GENESIS_RETURN_IF_BAD(work.Wait());
  GENESIS_RETURN_IF_BAD(grads.back().Synchronize());
  for (int k = 0; k < 300; k += 37) {
    GENESIS_RETURN_IF_TEXT(Check(grads[k], [&](int64_t) { return k % 9; }, absl::StrCat("grad ", k)));
  }
  return "";
}

TEST(NcclGroupTest, OneRankWorldRunsEveryOperation) {
  GENESIS_SKIP_WITHOUT_GPU();
  std::unique_ptr<ProcessGroup> group = OneRankWorld();
  ASSERT_NE(group, nullptr);
  EXPECT_EQ(group->backend(), "nccl");
  EXPECT_EQ(RunEveryOperation(*group), "");
  // One rank has no peer to read: NCCL runs its all_reduces.
  absl::StatusOr<nccl_backend::OneShotStats> one_shot = NcclOneShot(*group);
  ASSERT_TRUE(one_shot.ok()) << one_shot.status();
  EXPECT_FALSE(one_shot->enabled);
  EXPECT_EQ(one_shot->ToString(), "off: 1 ranks (it serves 2 to 8)");
}

TEST(NcclGroupTest, OneShotSizeBeyondItsLimitIsRefused) {
  GENESIS_SKIP_WITHOUT_GPU();
  auto id = NewNcclUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  GroupOptions options;
  options.nccl_one_shot_bytes = (size_t{4} << 20) + 1;
  absl::Status status = CreateNcclGroup(0, 1, Device::Cuda(0), *id, options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "nccl_one_shot_bytes = 4194305")) << status;
}

TEST(NcclGroupTest, OneRankNonBlockingWorldRunsEveryOperation) {
  GENESIS_SKIP_WITHOUT_GPU();
  std::unique_ptr<ProcessGroup> group = OneRankWorld(/*blocking=*/false);
  ASSERT_NE(group, nullptr);
  EXPECT_FALSE(group->info().nccl_blocking);
  EXPECT_EQ(RunEveryOperation(*group), "");
}

// Collectives issued while their stream is captured go into the CUDA graph: nothing runs
// at capture, every replay runs them all.
TEST(NcclGroupTest, CapturedCollectivesRunAtEveryReplay) {
  GENESIS_SKIP_WITHOUT_GPU();
  std::unique_ptr<ProcessGroup> group = OneRankWorld(/*blocking=*/true, NcclRegistration::kOff);
  ASSERT_NE(group, nullptr);
  absl::StatusOr<cuda::Stream> stream = cuda::Stream::Create(0);
  ASSERT_TRUE(stream.ok()) << stream.status();
  const storage::StorageOptions on_stream{.stream = stream->native()};
  auto in = Filled(2048, DType::kFloat32, [](int64_t i) { return i % 5; }, Device::Cuda(0));
  ASSERT_TRUE(in.ok()) << in.status();
  absl::StatusOr<Storage> source = in->To(Device::Cuda(0), on_stream);
  absl::StatusOr<Storage> out = storage::Zeros({2048}, DType::kFloat32, Device::Cuda(0), on_stream);
  ASSERT_TRUE(source.ok() && out.ok());
  ASSERT_TRUE(stream->Synchronize().ok());

  ASSERT_TRUE(cuda::BeginCapture(stream->native()).ok());
  for (int i = 0; i < 10; ++i) {
    absl::StatusOr<Work> w = group->AllGather(*source, *out);
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_TRUE(w->Done());
    absl::StatusOr<Work> r = group->AllReduce(*out, ReduceOp::kSum);
    ASSERT_TRUE(r.ok()) << r.status();
  }
  absl::StatusOr<cuda::Graph> graph = cuda::Graph::EndCapture(stream->native());
  ASSERT_TRUE(graph.ok()) << graph.status();
  // Captured, not run: `out` is still zero.
  ASSERT_TRUE(stream->Synchronize().ok());
  EXPECT_EQ(Check(*out, [](int64_t) { return 0; }, "before the replay"), "");
  for (int replay = 0; replay < 3; ++replay) ASSERT_TRUE(graph->Launch(stream->native()).ok());
  ASSERT_TRUE(stream->Synchronize().ok());
  EXPECT_EQ(Check(*out, [](int64_t i) { return i % 5; }, "after the replays"), "");
  // Eager operations on the same stream still work and complete.
  absl::StatusOr<Work> eager = group->AllReduce(*out, ReduceOp::kMax);
  ASSERT_TRUE(eager.ok());
  EXPECT_TRUE(eager->Wait().ok());
}

// Sub-groups in both modes: the split is waited for on the parent (NCCL fills in the
// new communicator only when the split is complete), a sub-group of a sub-group works,
// and the parent stays usable.
TEST(NcclGroupTest, SplitsWorkInBothModes) {
  GENESIS_SKIP_WITHOUT_GPU();
  for (bool blocking : {true, false}) {
    SCOPED_TRACE(blocking ? "blocking operations" : "non-blocking operations");
    std::unique_ptr<ProcessGroup> world = OneRankWorld(blocking, NcclRegistration::kOff);
    ASSERT_NE(world, nullptr);
    EXPECT_EQ(world->info().nccl_blocking, blocking);
    auto sub = world->Split({0}, "sub");
    ASSERT_TRUE(sub.ok()) << sub.status();
    ASSERT_NE(*sub, nullptr);
    EXPECT_EQ((*sub)->info().name, "world/sub");
    EXPECT_EQ((*sub)->info().nccl_blocking, blocking);
    auto subsub = (*sub)->Split({0}, "again");
    ASSERT_TRUE(subsub.ok()) << subsub.status();
    ASSERT_NE(*subsub, nullptr);
    auto s = Filled(4096, DType::kFloat32, [](int64_t i) { return i % 7; }, world->device());
    ASSERT_TRUE(s.ok()) << s.status();
    for (ProcessGroup* g : {world.get(), sub->get(), subsub->get()}) {
      auto w = g->AllReduce(*s, ReduceOp::kSum);
      ASSERT_TRUE(w.ok()) << w.status();
      ASSERT_TRUE(w->Wait().ok());
      EXPECT_EQ(Check(*s, [](int64_t i) { return i % 7; }, g->info().name), "");
    }
    sub->reset();
    auto w = world->Barrier();
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_TRUE(w->Wait().ok());
  }
}

// The Reducer on one GPU, packed buckets and views of one buffer: gradients on a
// stream of their own get new values at every step, written just before they are
// marked, so a bucket packed before its gradients were written would give the step
// before's values.
TEST(NcclGroupTest, ReducerPacksEachStepsValues) {
  GENESIS_SKIP_WITHOUT_GPU();
  std::unique_ptr<ProcessGroup> group = OneRankWorld();
  ASSERT_NE(group, nullptr);
  const Device gpu = group->device();
  auto stream = cuda::Stream::Create(gpu.index());
  ASSERT_TRUE(stream.ok()) << stream.status();
  storage::StorageOptions on_stream;
  on_stream.stream = stream->native();
  std::vector<Storage> grads;
  for (int k = 0; k < 40; ++k) {
    auto g = storage::Zeros({1 + (k * 7919) % 300000}, DType::kFloat32, gpu, on_stream);
    ASSERT_TRUE(g.ok()) << g.status();
    grads.push_back(*g);
  }
  auto flat = storage::Zeros({10 * 4000}, DType::kFloat32, gpu, on_stream);
  ASSERT_TRUE(flat.ok()) << flat.status();
  for (int k = 0; k < 10; ++k) {
    auto v = flat->Slice(0, 4000 * k, 4000 * (k + 1));
    ASSERT_TRUE(v.ok()) << v.status();
    grads.push_back(*v);
  }
  auto reducer = Reducer::Create(*group, grads, ReduceOp::kSum,
                                 {.bucket_bytes = 1 << 20, .last_bucket_bytes = 16 << 10});
  ASSERT_TRUE(reducer.ok()) << reducer.status();
  for (int step = 0; step < 5; ++step) {
    for (size_t k = 0; k < grads.size(); ++k) {
      auto values = Filled(
          grads[k].numel(), DType::kFloat32,
          [&](int64_t i) {
            return step * 100 + static_cast<double>(k % 7) + static_cast<double>(i % 5);
          },
          gpu);
      ASSERT_TRUE(values.ok()) << values.status();
      ASSERT_TRUE(grads[k].CopyFrom(*values).ok());
      ASSERT_TRUE((*reducer)->MarkReady(k).ok());
    }
    auto work = (*reducer)->Finish();
    ASSERT_TRUE(work.ok()) << work.status();
    ASSERT_TRUE(work->Wait().ok());
    for (size_t k = 0; k < grads.size(); ++k) {
      ASSERT_EQ(Check(
                    grads[k],
                    [&](int64_t i) {
                      return step * 100 + static_cast<double>(k % 7) + static_cast<double>(i % 5);
                    },
                    absl::StrCat("step ", step, ", gradient ", k)),
                "");
    }
  }
}

TEST(NcclGroupTest, PoolAllocationsInterleaveWithCollectives) {
  GENESIS_SKIP_WITHOUT_GPU();
  std::unique_ptr<ProcessGroup> group = OneRankWorld();
  ASSERT_NE(group, nullptr);
  // Storages dropped while their collective is in flight: the pool reuses their memory
  // only in stream order, so the values that later storages see are their own.
  for (int step = 0; step < 50; ++step) {
    auto s = Filled(1 << 16, DType::kFloat32, [&](int64_t) { return step; }, Device::Cuda(0));
    ASSERT_TRUE(s.ok()) << s.status();
    auto work = group->AllReduce(*s, ReduceOp::kSum);
    ASSERT_TRUE(work.ok()) << work.status();
    auto t = Filled(1 << 16, DType::kFloat32, [&](int64_t) { return -step; }, Device::Cuda(0));
    ASSERT_TRUE(t.ok());
    ASSERT_EQ(Check(*t, [&](int64_t) { return -step; }, "fresh storage"), "");
  }
}

TEST(NcclGroupTest, BadInputIsRefused) {
  GENESIS_SKIP_WITHOUT_GPU();
  std::unique_ptr<ProcessGroup> group = OneRankWorld();
  ASSERT_NE(group, nullptr);
  auto cpu = storage::Zeros({4}, DType::kFloat32, Device::Cpu());
  absl::Status status = group->AllReduce(*cpu, ReduceOp::kSum).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(status.message(), "is on cpu, but nccl group")) << status;
  for (DType dtype : {DType::kBool, DType::kInt16}) {
    auto s = storage::Zeros({4}, dtype, Device::Cuda(0));
    status = group->AllReduce(*s, ReduceOp::kMax).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(status.message(), "NCCL does not reduce")) << status;
    // Data movement of any dtype works: it moves bytes.
    auto b = group->Broadcast(*s, 0);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_TRUE(b->Wait().ok());
  }
  EXPECT_EQ(CreateNcclGroup(0, 1, Device::Cuda(0), std::vector<char>(5)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateNcclGroup(1, 1, Device::Cuda(0), std::vector<char>(128)).status().code(),
            absl::StatusCode::kInvalidArgument);
  group->Abort(absl::CancelledError("test abort"));
  auto s = storage::Zeros({4}, DType::kFloat32, Device::Cuda(0));
  status = group->AllReduce(*s, ReduceOp::kSum).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(status.message(), "test abort")) << status;
}

// ----- Buffer registration -----

using nccl_backend::RegistrationStats;

RegistrationStats Stats(ProcessGroup& group) {
  absl::StatusOr<RegistrationStats> stats = NcclBufferRegistration(group);
  EXPECT_TRUE(stats.ok()) << stats.status();
  return stats.ok() ? *stats : RegistrationStats();
}

constexpr int64_t kMiB = int64_t{1} << 20;
// 16 MiB of float32: a large block, in one piece of an expandable segment when the
// pool's memory was given back first (a fresh mapping starts a piece where it starts).
constexpr int64_t kOnePiece = 4 * kMiB;
// 64 MiB: more than a piece (32 MiB at most), so across two or more.
constexpr int64_t kManyPieces = 16 * kMiB;

auto Mod7 = [](int64_t i) { return static_cast<double>(i % 7); };

// All_reduce (sum, one rank: unchanged) of `s`, waited for and checked.
std::string AllReduceKeeps(ProcessGroup& group, const Storage& s, const std::string& what) {
  GENESIS_ASSIGN_OR_TEXT(w, group.AllReduce(s, ReduceOp::kSum));
  GENESIS_RETURN_IF_BAD(w.Wait());
  return Check(s, Mod7, what);
}

TEST(NcclRegistrationTest, PiecesAreRegisteredOnceAndDeregisteredBeforeTheyAreUnmapped) {
  GENESIS_SKIP_WITHOUT_GPU();
  std::unique_ptr<ProcessGroup> group = OneRankWorld();
  ASSERT_NE(group, nullptr);
  EXPECT_EQ(group->info().nccl_registration, NcclRegistration::kOn);
  if (!Stats(*group).enabled) {
    GTEST_SKIP() << "cuda:0's pool has no expandable segments of exportable memory";
  }
  const Device gpu = group->device();
  (void)memory::ReleaseCachedMemory();  // A fresh layout (other pools may hold blocks).
  {
    auto s = Filled(kOnePiece, DType::kFloat32, Mod7, gpu);
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_EQ(AllReduceKeeps(*group, *s, "first all_reduce"), "");
    RegistrationStats stats = Stats(*group);
    EXPECT_EQ(stats.misses, 1) << stats.ToString();
    EXPECT_EQ(stats.hits, 0) << stats.ToString();
    EXPECT_EQ(stats.unregistered, 0) << stats.ToString();
    EXPECT_EQ(stats.failures, 0) << stats.ToString();
    EXPECT_EQ(stats.pieces, 1) << stats.ToString();
    EXPECT_GE(stats.bytes, 4 * kOnePiece) << stats.ToString();
    // The second use of the same buffer hits the cache.
    ASSERT_EQ(AllReduceKeeps(*group, *s, "second all_reduce"), "");
    stats = Stats(*group);
    EXPECT_EQ(stats.hits, 1) << stats.ToString();
    EXPECT_EQ(stats.misses, 1) << stats.ToString();
    // Out of place: the output's piece is registered too; the input's hits.
    auto out = storage::Zeros({kOnePiece}, DType::kFloat32, gpu);
    ASSERT_TRUE(out.ok()) << out.status();
    auto g = group->AllGather(*s, *out);
    ASSERT_TRUE(g.ok()) << g.status();
    ASSERT_TRUE(g->Wait().ok());
    EXPECT_EQ(Check(*out, Mod7, "all_gather"), "");
    stats = Stats(*group);
    EXPECT_EQ(stats.hits, 2) << stats.ToString();
    EXPECT_EQ(stats.misses, 2) << stats.ToString();
    EXPECT_EQ(stats.pieces, 2) << stats.ToString();
    // A buffer across pieces cannot be registered: it is copied through the staging
    // area (registered memory of the group's own), in and out, with the same results.
    EXPECT_EQ(stats.staged, 0) << stats.ToString();
    auto big = Filled(kManyPieces, DType::kFloat32, Mod7, gpu);
    ASSERT_TRUE(big.ok()) << big.status();
    ASSERT_EQ(AllReduceKeeps(*group, *big, "all_reduce across pieces"), "");
    stats = Stats(*group);
    EXPECT_EQ(stats.unregistered, 1) << stats.ToString();
    EXPECT_EQ(stats.staged, 1) << stats.ToString();
    EXPECT_GE(stats.staging_bytes, 4 * kManyPieces) << stats.ToString();
    EXPECT_EQ(stats.misses, 2) << stats.ToString();
    // The area is reused, and grows only for a larger need.
    ASSERT_EQ(AllReduceKeeps(*group, *big, "all_reduce across pieces again"), "");
    EXPECT_EQ(Stats(*group).staged, 2);
    EXPECT_EQ(Stats(*group).staging_bytes, stats.staging_bytes);
  }
  // The storages are gone and the pool gives their memory back: each registered piece
  // is deregistered before it is unmapped.
  (void)memory::ReleaseCachedMemory();
  RegistrationStats stats = Stats(*group);
  EXPECT_EQ(stats.deregistrations, 2) << stats.ToString();
  EXPECT_EQ(stats.pieces, 0) << stats.ToString();
  EXPECT_EQ(stats.bytes, 0) << stats.ToString();
  // New memory: registered afresh, and right.
  auto s = Filled(kOnePiece, DType::kFloat32, Mod7, gpu);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(AllReduceKeeps(*group, *s, "all_reduce after the unmapping"), "");
  stats = Stats(*group);
  EXPECT_EQ(stats.misses, 3) << stats.ToString();
  EXPECT_EQ(stats.pieces, 1) << stats.ToString();
  // The group goes with a piece still registered (and its memory still mapped): it
  // deregisters it; the pool unmaps the piece later, at the latest when the process
  // exits, without calling the group.
}

TEST(NcclRegistrationTest, OffRegistersNothingAndGivesTheSameResults) {
  GENESIS_SKIP_WITHOUT_GPU();
  std::unique_ptr<ProcessGroup> group = OneRankWorld(/*blocking=*/true,
                                                     /*registration=*/NcclRegistration::kOff);
  ASSERT_NE(group, nullptr);
  EXPECT_EQ(group->info().nccl_registration, NcclRegistration::kOff);
  auto s = Filled(kOnePiece, DType::kFloat32, Mod7, group->device());
  ASSERT_TRUE(s.ok()) << s.status();
  for (int i = 0; i < 2; ++i) ASSERT_EQ(AllReduceKeeps(*group, *s, "all_reduce"), "");
  const RegistrationStats stats = Stats(*group);
  EXPECT_FALSE(stats.enabled);
  EXPECT_EQ(stats.hits + stats.misses + stats.unregistered, 0) << stats.ToString();
}

// The default: all_gather with 16 MiB of output or more runs registered, a smaller one
// and reductions run on the communicator where nothing is registered (all_to_all and
// messages: NcclTwoProcessTest.BatchesMixingRegisteredAndPlainMessagesArrive).
TEST(NcclRegistrationTest, AutoRegistersLargeAllGathersNotReductions) {
  GENESIS_SKIP_WITHOUT_GPU();
  std::unique_ptr<ProcessGroup> group = OneRankWorld(/*blocking=*/true, NcclRegistration::kAuto);
  ASSERT_NE(group, nullptr);
  EXPECT_EQ(group->info().nccl_registration, NcclRegistration::kAuto);
  if (!Stats(*group).enabled) GTEST_SKIP() << "registration is off on cuda:0";
  const Device gpu = group->device();
  (void)memory::ReleaseCachedMemory();
  auto s = Filled(kOnePiece, DType::kFloat32, Mod7, gpu);  // 16 MiB.
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(AllReduceKeeps(*group, *s, "all_reduce of 16 MiB"), "");
  auto small = Filled(kMiB / 4, DType::kFloat32, Mod7, gpu);  // 1 MiB.
  ASSERT_TRUE(small.ok()) << small.status();
  auto small_out = storage::Zeros({kMiB / 4}, DType::kFloat32, gpu);
  ASSERT_TRUE(small_out.ok()) << small_out.status();
  auto g = group->AllGather(*small, *small_out);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(g->Wait().ok());
  EXPECT_EQ(Check(*small_out, Mod7, "all_gather of 1 MiB"), "");
  RegistrationStats stats = Stats(*group);
  EXPECT_EQ(stats.hits + stats.misses + stats.unregistered + stats.staged, 0) << stats.ToString();
  // 16 MiB of output: registered (input and output each in one piece, or staged).
  auto out = storage::Zeros({kOnePiece}, DType::kFloat32, gpu);
  ASSERT_TRUE(out.ok()) << out.status();
  g = group->AllGather(*s, *out);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(g->Wait().ok());
  EXPECT_EQ(Check(*out, Mod7, "all_gather of 16 MiB"), "");
  stats = Stats(*group);
  EXPECT_EQ(stats.hits + stats.misses + stats.unregistered, 2) << stats.ToString();
  EXPECT_EQ(stats.staged, stats.unregistered) << stats.ToString();
  // Across pieces: staged, and right.
  auto big = Filled(kManyPieces, DType::kFloat32, Mod7, gpu);
  ASSERT_TRUE(big.ok()) << big.status();
  auto big_out = storage::Zeros({kManyPieces}, DType::kFloat32, gpu);
  ASSERT_TRUE(big_out.ok()) << big_out.status();
  g = group->AllGather(*big, *big_out);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(g->Wait().ok());
  EXPECT_EQ(Check(*big_out, Mod7, "all_gather of 64 MiB"), "");
  stats = Stats(*group);
  EXPECT_EQ(stats.hits + stats.misses + stats.unregistered, 4) << stats.ToString();
  EXPECT_GE(stats.staged, 2) << stats.ToString();
  EXPECT_EQ(stats.staged, stats.unregistered) << stats.ToString();
  // A reduce_scatter on the same registered memory stays unregistered.
  auto rs = group->ReduceScatter(*s, *out, ReduceOp::kSum);
  ASSERT_TRUE(rs.ok()) << rs.status();
  ASSERT_TRUE(rs->Wait().ok());
  EXPECT_EQ(Check(*out, Mod7, "reduce_scatter"), "");
  EXPECT_EQ(Stats(*group).hits + Stats(*group).misses + Stats(*group).unregistered, 4);
}

// kAuto's registered communicator shares the blocking one's resources: a group whose
// operations run on the non-blocking communicator runs them all unregistered.
TEST(NcclRegistrationTest, AutoStaysOffWhereOperationsRunNonBlocking) {
  GENESIS_SKIP_WITHOUT_GPU();
  std::unique_ptr<ProcessGroup> group = OneRankWorld(/*blocking=*/false, NcclRegistration::kAuto);
  ASSERT_NE(group, nullptr);
  auto s = Filled(kOnePiece, DType::kFloat32, Mod7, group->device());
  ASSERT_TRUE(s.ok()) << s.status();
  auto out = storage::Zeros({kOnePiece}, DType::kFloat32, group->device());
  ASSERT_TRUE(out.ok()) << out.status();
  auto g = group->AllGather(*s, *out);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(g->Wait().ok());
  EXPECT_EQ(Check(*out, Mod7, "all_gather of 16 MiB"), "");
  const RegistrationStats stats = Stats(*group);
  EXPECT_FALSE(stats.enabled);
  EXPECT_EQ(stats.hits + stats.misses + stats.unregistered + stats.staged, 0) << stats.ToString();
}

// A captured all_gather that the policy would register runs as an unregistered one
// (NCCL registers captured buffers itself): nothing staged or registered by the group,
// and the replays gather.
TEST(NcclRegistrationTest, CapturedOperationsAreNotStaged) {
  GENESIS_SKIP_WITHOUT_GPU();
  std::unique_ptr<ProcessGroup> group = OneRankWorld(/*blocking=*/true, NcclRegistration::kAuto);
  ASSERT_NE(group, nullptr);
  if (!Stats(*group).enabled) GTEST_SKIP() << "registration is off on cuda:0";
  absl::StatusOr<cuda::Stream> stream = cuda::Stream::Create(0);
  ASSERT_TRUE(stream.ok()) << stream.status();
  const storage::StorageOptions on_stream{.stream = stream->native()};
  auto in = Filled(kOnePiece, DType::kFloat32, Mod7, Device::Cuda(0));
  ASSERT_TRUE(in.ok()) << in.status();
  absl::StatusOr<Storage> source = in->To(Device::Cuda(0), on_stream);
  absl::StatusOr<Storage> out =
      storage::Zeros({kOnePiece}, DType::kFloat32, Device::Cuda(0), on_stream);
  ASSERT_TRUE(source.ok() && out.ok());
  ASSERT_TRUE(stream->Synchronize().ok());
  ASSERT_TRUE(cuda::BeginCapture(stream->native()).ok());
  absl::StatusOr<Work> w = group->AllGather(*source, *out);
  ASSERT_TRUE(w.ok()) << w.status();
  absl::StatusOr<cuda::Graph> graph = cuda::Graph::EndCapture(stream->native());
  ASSERT_TRUE(graph.ok()) << graph.status();
  ASSERT_TRUE(graph->Launch(stream->native()).ok());
  ASSERT_TRUE(stream->Synchronize().ok());
  EXPECT_EQ(Check(*out, Mod7, "after the replay"), "");
  const RegistrationStats stats = Stats(*group);
  EXPECT_EQ(stats.hits + stats.misses + stats.unregistered + stats.staged, 0) << stats.ToString();
}

TEST(NcclRegistrationTest, EveryCommunicatorDeregistersItsOwnPieces) {
  GENESIS_SKIP_WITHOUT_GPU();
  std::unique_ptr<ProcessGroup> world = OneRankWorld();
  ASSERT_NE(world, nullptr);
  if (!Stats(*world).enabled) GTEST_SKIP() << "registration is off on cuda:0";
  auto sub = world->Split({0}, "sub");
  ASSERT_TRUE(sub.ok()) << sub.status();
  ASSERT_NE(*sub, nullptr);
  EXPECT_EQ((*sub)->info().nccl_registration, NcclRegistration::kOn);
  (void)memory::ReleaseCachedMemory();
  {
    auto s = Filled(kOnePiece, DType::kFloat32, Mod7, world->device());
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_EQ(AllReduceKeeps(*world, *s, "world"), "");
    ASSERT_EQ(AllReduceKeeps(**sub, *s, "sub-group"), "");
    EXPECT_EQ(Stats(*world).pieces, 1);
    EXPECT_EQ(Stats(**sub).pieces, 1);
  }
  (void)memory::ReleaseCachedMemory();
  EXPECT_EQ(Stats(*world).deregistrations, 1) << Stats(*world).ToString();
  EXPECT_EQ(Stats(**sub).deregistrations, 1) << Stats(**sub).ToString();
  // A group that goes first deregisters its pieces; the other keeps and uses its own.
  auto s = Filled(kOnePiece, DType::kFloat32, Mod7, world->device());
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(AllReduceKeeps(**sub, *s, "sub-group"), "");
  ASSERT_EQ(AllReduceKeeps(*world, *s, "world"), "");
  sub->reset();
  ASSERT_EQ(AllReduceKeeps(*world, *s, "world after the sub-group"), "");
  EXPECT_EQ(Stats(*world).hits, 1) << Stats(*world).ToString();
  *s = Storage();  // Its memory goes back to the pool.
  (void)memory::ReleaseCachedMemory();
  EXPECT_EQ(Stats(*world).deregistrations, 2) << Stats(*world).ToString();
}

TEST(NcclRegistrationTest, AnAbortedGroupLetsItsPiecesGo) {
  GENESIS_SKIP_WITHOUT_GPU();
  std::unique_ptr<ProcessGroup> group = OneRankWorld();
  ASSERT_NE(group, nullptr);
  if (!Stats(*group).enabled) GTEST_SKIP() << "registration is off on cuda:0";
  (void)memory::ReleaseCachedMemory();
  {
    auto s = Filled(kOnePiece, DType::kFloat32, Mod7, group->device());
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_EQ(AllReduceKeeps(*group, *s, "all_reduce"), "");
    EXPECT_EQ(Stats(*group).pieces, 1);
    group->Abort(absl::CancelledError("test abort"));
  }
  // NCCL's abort dropped the registrations: the unmapping only forgets them.
  (void)memory::ReleaseCachedMemory();
  EXPECT_EQ(Stats(*group).pieces, 0);
  auto s = Filled(kOnePiece, DType::kFloat32, Mod7, group->device());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(group->AllReduce(*s, ReduceOp::kSum).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(NcclGroupTest, WithoutNcclTheErrorSaysWhy) {
  if (NewNcclUniqueId().ok()) GTEST_SKIP() << "NCCL is available in this build";
  absl::Status status = NewNcclUniqueId().status();
  EXPECT_FALSE(status.ok());
  EXPECT_TRUE(absl::StrContains(status.ToString(), "NCCL")) << status;
}

}  // namespace
}  // namespace genesis::distributed
