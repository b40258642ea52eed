// NCCL groups within one process: a one-rank world on cuda:0 runs every operation, and
// bad input is refused. Skips without a GPU; in a build without NCCL it checks that
// every entry point says so.
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "genesis/cuda/test_util.h"
#include "genesis/distributed/bucketed.h"
#include "genesis/distributed/process_group.h"
#include "genesis/distributed/process_group_factory.h"
#include "genesis/distributed/testing/collective_checks.h"
#include "genesis/memory/memory_api.h"
#include "gtest/gtest.h"

namespace genesis::distributed {
namespace {

using storage::Storage;
using testing::Check;
using testing::Filled;

std::unique_ptr<ProcessGroup> OneRankWorld(bool blocking = false) {
  auto id = NewNcclUniqueId();
  EXPECT_TRUE(id.ok()) << id.status();
  if (!id.ok()) return nullptr;
  GroupOptions options;
  options.timeout = absl::Seconds(30);
  options.nccl_blocking = blocking;
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
}

TEST(NcclGroupTest, OneRankBlockingWorldRunsEveryOperation) {
  GENESIS_SKIP_WITHOUT_GPU();
  std::unique_ptr<ProcessGroup> group = OneRankWorld(/*blocking=*/true);
  ASSERT_NE(group, nullptr);
  EXPECT_TRUE(group->info().nccl_blocking);
  EXPECT_EQ(RunEveryOperation(*group), "");
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

TEST(NcclGroupTest, WithoutNcclTheErrorSaysWhy) {
  if (NewNcclUniqueId().ok()) GTEST_SKIP() << "NCCL is available in this build";
  absl::Status status = NewNcclUniqueId().status();
  EXPECT_FALSE(status.ok());
  EXPECT_TRUE(absl::StrContains(status.ToString(), "NCCL")) << status;
}

}  // namespace
}  // namespace genesis::distributed
