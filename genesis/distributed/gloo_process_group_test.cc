// Process groups over Gloo between forked processes on the loopback: every operation
// with known results, every dtype, uneven sizes, bad input, faults and sub-groups.
#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "genesis/core/dtype.h"
#include "genesis/core/status.h"
#include "genesis/distributed/bucketed.h"
#include "genesis/distributed/process_group.h"
#include "genesis/distributed/process_group_factory.h"
#include "genesis/distributed/store.h"
#include "genesis/distributed/symmetric_window.h"
#include "genesis/distributed/testing/collective_checks.h"
#include "genesis/distributed/testing/multi_process.h"
#include "genesis/storage/storage.h"
#include "gtest/gtest.h"

namespace genesis::distributed {
namespace {

using storage::Storage;
using testing::Check;
using testing::Contribution;
using testing::Expected;
using testing::Filled;
using testing::FreshDirectory;
using testing::RankOutcome;
using testing::RunRanks;

constexpr DType kAllDTypes[] = {DType::kBool,    DType::kUInt8,    DType::kInt8,
                                DType::kInt16,   DType::kInt32,    DType::kInt64,
                                DType::kFloat16, DType::kBFloat16, DType::kFloat32,
                                DType::kFloat64};
constexpr ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin,
                                ReduceOp::kMax, ReduceOp::kAvg};

// Runs `body(group)` on `n` ranks of a fresh Gloo group; expects every rank to succeed.
void RunGroup(int n, const std::function<std::string(ProcessGroup&)>& body,
              absl::Duration timeout = absl::Seconds(20)) {
  const std::string dir = FreshDirectory("store");
  std::vector<RankOutcome> outcomes = RunRanks(n, absl::Seconds(120), [&](int rank) {
    absl::StatusOr<std::shared_ptr<Store>> store = Store::File(dir);
    if (!store.ok()) return std::string(store.status().message());
    GroupOptions options;
    options.timeout = timeout;
    auto group = CreateGlooGroup(rank, n, *store, options);
    if (!group.ok()) return std::string(group.status().ToString());
    return body(**group);
  });
  for (const RankOutcome& o : outcomes) EXPECT_TRUE(o.ok()) << o.Describe();
}

// ---- Every reduction of every dtype, on 2, 3 and 4 ranks.

class AllReduceTest : public ::testing::TestWithParam<int> {};

TEST_P(AllReduceTest, EveryDTypeAndReduction) {
  const int n = GetParam();
  RunGroup(n, [n](ProcessGroup& group) -> std::string {
    for (DType dtype : kAllDTypes) {
      for (ReduceOp op : kAllOps) {
        if (!CheckReduction(op, dtype).ok()) continue;
        const int64_t count = 1000 + 7 * n;  // Uneven: not a multiple of the ranks.
        GENESIS_ASSIGN_OR_TEXT(s, Filled(count, dtype,
                                 [&](int64_t i) { return Contribution(op, group.rank(), i); }));
        GENESIS_ASSIGN_OR_TEXT(work, group.AllReduce(s, op));
        GENESIS_RETURN_IF_BAD(work.Wait());
        if (!work.Done()) return "Done() is false after Wait()";
        GENESIS_RETURN_IF_TEXT(Check(s, [&](int64_t i) { return Expected(op, dtype, n, i); },
                             "all_reduce " + std::string(DTypeName(dtype)) + " " +
                                 std::string(ReduceOpName(op))));
      }
    }
    return "";
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, AllReduceTest, ::testing::Values(2, 3, 4));

// ---- The other collectives, on 3 ranks (an odd count).

// The Gloo world of rank `rank` of `size` from torchrun's variables set by hand (one
// host, a store under `store_dir`, a 20 s timeout; GENESIS_RUN_ID if `run_id` is given).
absl::StatusOr<std::unique_ptr<ProcessGroup>> GlooWorldByHand(int rank, int size,
                                                              const std::string& store_dir,
                                                              const std::string& run_id) {
  auto lookup = [=](std::string_view name) -> std::optional<std::string> {
    if (name == "RANK" || name == "LOCAL_RANK") return std::to_string(rank);
    if (name == "WORLD_SIZE" || name == "LOCAL_WORLD_SIZE") return std::to_string(size);
    if (name == "MASTER_ADDR") return std::string("127.0.0.1");
    if (name == "MASTER_PORT") return std::string("29500");
    if (name == "GENESIS_STORE_DIR") return store_dir;
    if (name == "GENESIS_RUN_ID" && !run_id.empty()) return run_id;
    if (name == "GENESIS_DISTRIBUTED_TIMEOUT") return std::string("20");
    return std::nullopt;
  };
  GENESIS_ASSIGN_OR_RETURN(LaunchEnv env, ParseLaunchEnv(lookup));
  return ProcessGroupFromEnvironment(Backend::kGloo, env, lookup);
}

TEST(GlooGroupTest, BroadcastReduceAndBarrier) {
  RunGroup(3, [](ProcessGroup& group) -> std::string {
    const int r = group.rank();
    for (DType dtype : {DType::kBFloat16, DType::kInt64, DType::kBool}) {
      GENESIS_ASSIGN_OR_TEXT(b, Filled(513, dtype, [&](int64_t i) { return (i + r * 3) % 2; }));
      GENESIS_ASSIGN_OR_TEXT(bw, group.Broadcast(b, 1));
      GENESIS_RETURN_IF_BAD(bw.Wait());
      GENESIS_RETURN_IF_TEXT(Check(b, [](int64_t i) { return (i + 3) % 2; }, "broadcast from 1"));
    }
    GENESIS_ASSIGN_OR_TEXT(s, Filled(77, DType::kFloat32, [&](int64_t i) { return r + i; }));
    GENESIS_ASSIGN_OR_TEXT(rw, group.Reduce(s, 2, ReduceOp::kSum));
    GENESIS_RETURN_IF_BAD(rw.Wait());
    GENESIS_RETURN_IF_TEXT(Check(
        s, [&](int64_t i) { return r == 2 ? 3.0 * i + 3 : static_cast<double>(r + i); },
        "reduce to 2"));
    GENESIS_ASSIGN_OR_TEXT(barrier, group.Barrier());
    GENESIS_RETURN_IF_BAD(barrier.Wait());
    return "";
  });
}

// Operations run in issue order whoever runs them: the group's thread, or a caller that
// waits for the operation at the head of the queue and runs it itself. Waiting in any
// order (the last first, then from the first; some with a deadline shorter than the
// group's timeout, which are never run by the waiter) finishes every one, correctly.
TEST(GlooGroupTest, WaitingInAnyOrderRunsEveryOperationInIssueOrder) {
  RunGroup(3, [](ProcessGroup& group) -> std::string {
    const int r = group.rank();
    constexpr int kOps = 24;
    for (int round = 0; round < 3; ++round) {
      std::vector<Storage> values;
      std::vector<Work> works;
      for (int k = 0; k < kOps; ++k) {
        GENESIS_ASSIGN_OR_TEXT(v, Filled(1 + 37 * k, DType::kFloat32,
                                         [&](int64_t i) { return r + k + i; }));
        GENESIS_ASSIGN_OR_TEXT(w, group.AllReduce(v, ReduceOp::kSum));
        values.push_back(v);
        works.push_back(w);
      }
      std::vector<int> order;
      if (round == 0) {
        for (int k = kOps - 1; k >= 0; --k) order.push_back(k);
      } else {
        for (int k = 0; k < kOps; ++k) order.push_back(k);
      }
      for (int k : order) {
        if (round == 2 && k % 3 == 0) {
          // Less than the group's timeout: waited for, not run here.
          GENESIS_RETURN_IF_BAD(works[k].Wait(absl::Seconds(10)));
        } else {
          GENESIS_RETURN_IF_BAD(works[k].Wait());
        }
      }
      for (int k = 0; k < kOps; ++k) {
        GENESIS_RETURN_IF_TEXT(Check(values[k], [&](int64_t i) { return 3.0 * (k + i) + 3; },
                                     absl::StrCat("all_reduce ", k, " of round ", round)));
      }
    }
    return "";
  });
}

// An operation that its caller does not wait for runs anyway (the group's thread takes
// it once a waiter had time to come), so a peer that waits for its side finishes.
TEST(GlooGroupTest, AnOperationNobodyWaitsForRuns) {
  RunGroup(2, [](ProcessGroup& group) -> std::string {
    const int r = group.rank();
    GENESIS_ASSIGN_OR_TEXT(v, Filled(1000, DType::kFloat32, [&](int64_t i) { return r + i; }));
    GENESIS_ASSIGN_OR_TEXT(w, group.AllReduce(v, ReduceOp::kSum));
    if (r == 1) {
      GENESIS_RETURN_IF_BAD(w.Wait());
    } else {
      const absl::Time give_up = absl::Now() + absl::Seconds(30);
      while (!w.Done() && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(1));
      if (!w.Done()) return std::string("the operation nobody waited for did not run");
    }
    return Check(v, [](int64_t i) { return 1.0 + 2 * i; }, "all_reduce not waited for");
  });
}

TEST(GlooGroupTest, AllGatherReduceScatterAllToAll) {
  RunGroup(3, [](ProcessGroup& group) -> std::string {
    const int r = group.rank();
    const int n = group.size();
    for (DType dtype : {DType::kFloat16, DType::kInt8, DType::kFloat64}) {
      // all_gather into one storage (any shape with the right element count).
      GENESIS_ASSIGN_OR_TEXT(in, Filled(5, dtype, [&](int64_t i) { return r * 10 + i; }));
      GENESIS_ASSIGN_OR_TEXT(out, storage::Empty({n, 5}, dtype, Device::Cpu()));
      GENESIS_ASSIGN_OR_TEXT(gw, group.AllGather(in, out));
      GENESIS_RETURN_IF_BAD(gw.Wait());
      GENESIS_RETURN_IF_TEXT(Check(out, [](int64_t i) { return (i / 5) * 10 + i % 5; }, "all_gather"));
      // ... and into a list.
      std::vector<Storage> list;
      for (int k = 0; k < n; ++k) {
        GENESIS_ASSIGN_OR_TEXT(e, storage::Empty({5}, dtype, Device::Cpu()));
        list.push_back(e);
      }
      GENESIS_ASSIGN_OR_TEXT(lw, group.AllGather(in, list));
      GENESIS_RETURN_IF_BAD(lw.Wait());
      for (int k = 0; k < n; ++k) {
        GENESIS_RETURN_IF_TEXT(Check(list[k], [&](int64_t i) { return k * 10 + i; },
                             absl::StrCat("all_gather list ", k)));
      }
      // reduce_scatter: chunk k of rank r holds r + k*100 + i.
      GENESIS_ASSIGN_OR_TEXT(rin, Filled(4 * n, dtype, [&](int64_t i) { return r + (i / 4) + i % 4; }));
      GENESIS_ASSIGN_OR_TEXT(rout, storage::Empty({4}, dtype, Device::Cpu()));
      GENESIS_ASSIGN_OR_TEXT(rw, group.ReduceScatter(rin, rout, ReduceOp::kMax));
      GENESIS_RETURN_IF_BAD(rw.Wait());
      GENESIS_RETURN_IF_TEXT(Check(rout, [&](int64_t i) { return (n - 1) + r + i; }, "reduce_scatter"));
      // all_to_all: chunk j of rank r is r*10 + j; chunk i of the output comes from rank i.
      GENESIS_ASSIGN_OR_TEXT(ain, Filled(2 * n, dtype, [&](int64_t i) { return r * 10 + i / 2; }));
      GENESIS_ASSIGN_OR_TEXT(aout, storage::Empty({2 * n}, dtype, Device::Cpu()));
      GENESIS_ASSIGN_OR_TEXT(aw, group.AllToAll(ain, aout));
      GENESIS_RETURN_IF_BAD(aw.Wait());
      GENESIS_RETURN_IF_TEXT(Check(aout, [&](int64_t i) { return (i / 2) * 10 + r; }, "all_to_all"));
    }
    return "";
  });
}

TEST(GlooGroupTest, SendRecvRingAndBatch) {
  RunGroup(4, [](ProcessGroup& group) -> std::string {
    const int r = group.rank();
    const int n = group.size();
    const int next = (r + 1) % n;
    const int prev = (r + n - 1) % n;
    // Everyone sends first, then receives: sends must not wait for receives.
    GENESIS_ASSIGN_OR_TEXT(out, Filled(1001, DType::kInt32, [&](int64_t i) { return r * 1000 + i; }));
    GENESIS_ASSIGN_OR_TEXT(in, storage::Zeros({1001}, DType::kInt32, Device::Cpu()));
    GENESIS_ASSIGN_OR_TEXT(sw, group.Send(out, next, /*tag=*/7));
    GENESIS_ASSIGN_OR_TEXT(rw, group.Recv(in, prev, /*tag=*/7));
    GENESIS_RETURN_IF_BAD(sw.Wait());
    GENESIS_RETURN_IF_BAD(rw.Wait());
    GENESIS_RETURN_IF_TEXT(Check(in, [&](int64_t i) { return prev * 1000 + i; }, "ring recv"));
    // A batch: to and from both neighbours.
    GENESIS_ASSIGN_OR_TEXT(a, storage::Zeros({3}, DType::kFloat32, Device::Cpu()));
    GENESIS_ASSIGN_OR_TEXT(b, storage::Zeros({3}, DType::kFloat32, Device::Cpu()));
    std::vector<StoragePeerOp> ops = {
        {PeerOp::Kind::kRecv, a, prev, 1},
        {PeerOp::Kind::kRecv, b, next, 2},
        {PeerOp::Kind::kSend, out, next, 1},
        {PeerOp::Kind::kSend, out, prev, 2},
    };
    GENESIS_ASSIGN_OR_TEXT(s1, Filled(3, DType::kFloat32, [&](int64_t i) { return r + i; }));
    ops[2].storage = s1;
    ops[3].storage = s1;
    GENESIS_ASSIGN_OR_TEXT(batch, group.SendRecv(ops));
    GENESIS_RETURN_IF_BAD(batch.Wait());
    GENESIS_RETURN_IF_TEXT(Check(a, [&](int64_t i) { return prev + i; }, "batch from prev"));
    GENESIS_RETURN_IF_TEXT(Check(b, [&](int64_t i) { return next + i; }, "batch from next"));
    return "";
  });
}

TEST(GlooGroupTest, SplitIntoSubGroups) {
  RunGroup(4, [](ProcessGroup& group) -> std::string {
    const int r = group.rank();
    GENESIS_ASSIGN_OR_TEXT(odd, group.Split({3, 1}, "odd"));
    if ((r % 2 == 1) != (odd != nullptr)) return "membership of the sub-group is wrong";
    if (odd == nullptr) return "";
    if (odd->size() != 2 || odd->rank() != r / 2) {
      return absl::StrCat("sub-group rank ", odd->rank(), " of ", odd->size());
    }
    if (odd->name() != "world/odd") return "sub-group name " + odd->name();
    GENESIS_ASSIGN_OR_TEXT(s, Filled(10, DType::kInt32, [&](int64_t) { return r; }));
    GENESIS_ASSIGN_OR_TEXT(w, odd->AllReduce(s, ReduceOp::kSum));
    GENESIS_RETURN_IF_BAD(w.Wait());
    return Check(s, [](int64_t) { return 4; }, "all_reduce in the sub-group");
  });
}

// ---- Bucketed collectives: many storages, packed or as views of one buffer.

TEST(GlooGroupTest, BucketedAllReduceAndBroadcast) {
  RunGroup(3, [](ProcessGroup& group) -> std::string {
    const int r = group.rank();
    // 200 gradients of uneven sizes, two dtypes, in buckets of 4 KiB.
    std::vector<Storage> grads;
    for (int k = 0; k < 200; ++k) {
      const DType dtype = k % 7 == 0 ? DType::kBFloat16 : DType::kFloat32;
      GENESIS_ASSIGN_OR_TEXT(g, Filled(1 + (k * 37) % 300, dtype, [&](int64_t i) { return r + k % 5 + i % 4; }));
      grads.push_back(g);
    }
    // And 3 views of one flat buffer, reduced in place.
    GENESIS_ASSIGN_OR_TEXT(flat, Filled(90, DType::kFloat32, [&](int64_t i) { return r * i; }));
    for (int k = 0; k < 3; ++k) {
      GENESIS_ASSIGN_OR_TEXT(view, flat.Slice(0, 30 * k, 30 * (k + 1)));
      grads.push_back(view);
    }
    GENESIS_ASSIGN_OR_TEXT(work, BucketedAllReduce(group, grads, ReduceOp::kSum, {.bucket_bytes = 4096}));
    GENESIS_RETURN_IF_BAD(work.Wait());
    for (int k = 0; k < 200; ++k) {
      GENESIS_RETURN_IF_TEXT(Check(grads[k], [&](int64_t i) { return 3 + 3 * (k % 5) + 3 * (i % 4); },
                           absl::StrCat("gradient ", k)));
    }
    GENESIS_RETURN_IF_TEXT(Check(flat, [](int64_t i) { return 3.0 * i; }, "flat gradients"));
    GENESIS_ASSIGN_OR_TEXT(bw, BucketedBroadcast(group, grads, 2, {.bucket_bytes = 1000}));
    GENESIS_RETURN_IF_BAD(bw.Wait());
    return "";
  });
}

// Many packed buckets of one dtype (one buffer, fewer collectives than buckets:
// PackedCollectives), runs of them broken by a bfloat16 gradient and by views of one
// buffer, reduced and broadcast with every value checked.
TEST(GlooGroupTest, BucketedRunsOfPackedBucketsSumAndBroadcast) {
  RunGroup(3, [](ProcessGroup& group) -> std::string {
    const int r = group.rank();
    const auto value = [](int rank, int k, int64_t i) { return rank + k % 5 + i % 4; };
    std::vector<Storage> grads;
    GENESIS_ASSIGN_OR_TEXT(flat, Filled(90, DType::kFloat32, [&](int64_t i) { return r * i; }));
    for (int k = 0; k < 150; ++k) {
      if (k == 60) {  // Three views of one buffer: an in-place bucket between two runs.
        for (int v = 0; v < 3; ++v) {
          GENESIS_ASSIGN_OR_TEXT(view, flat.Slice(0, 30 * v, 30 * (v + 1)));
          grads.push_back(view);
        }
      }
      const DType dtype = k == 100 ? DType::kBFloat16 : DType::kFloat32;
      GENESIS_ASSIGN_OR_TEXT(
          g, Filled(1 + (k * 29) % 500, dtype, [&](int64_t i) { return value(r, k, i); }));
      grads.push_back(g);
    }
    GENESIS_ASSIGN_OR_TEXT(work,
                           BucketedAllReduce(group, grads, ReduceOp::kSum, {.bucket_bytes = 2048}));
    GENESIS_RETURN_IF_BAD(work.Wait());
    // The gradients' index k, past the three views.
    const auto gradient = [](size_t index) {
      return static_cast<int>(index < 60 ? index : index - 3);
    };
    for (size_t index = 0; index < grads.size(); ++index) {
      if (index >= 60 && index < 63) continue;
      const int k = gradient(index);
      GENESIS_RETURN_IF_TEXT(Check(
          grads[index], [&](int64_t i) { return value(0, k, i) + value(1, k, i) + value(2, k, i); },
          absl::StrCat("all_reduce of gradient ", k)));
    }
    GENESIS_RETURN_IF_TEXT(Check(
        flat, [](int64_t i) { return 3.0 * i; }, "flat gradients"));
    // Broadcast from rank 1 of this rank's own values.
    for (size_t index = 0; index < grads.size(); ++index) {
      const int k = gradient(index);
      const bool view = index >= 60 && index < 63;
      const int64_t start = view ? 30 * static_cast<int64_t>(index - 60) : 0;
      GENESIS_ASSIGN_OR_TEXT(
          mine, Filled(grads[index].numel(), grads[index].dtype(), [&](int64_t i) -> double {
            return view ? r * (start + i) : value(r, k, i);
          }));
      GENESIS_RETURN_IF_BAD(grads[index].CopyFrom(mine));
    }
    GENESIS_ASSIGN_OR_TEXT(bw, BucketedBroadcast(group, grads, 1, {.bucket_bytes = 2048}));
    GENESIS_RETURN_IF_BAD(bw.Wait());
    for (size_t index = 0; index < grads.size(); ++index) {
      if (index >= 60 && index < 63) continue;
      const int k = gradient(index);
      GENESIS_RETURN_IF_TEXT(Check(
          grads[index], [&](int64_t i) { return value(1, k, i); },
          absl::StrCat("broadcast of gradient ", k)));
    }
    GENESIS_RETURN_IF_TEXT(Check(
        flat, [](int64_t i) { return 1.0 * i; }, "flat, broadcast"));
    return "";
  });
}

// ---- Bad input: each refused before anything is queued, naming the value.

TEST(GlooGroupTest, BadInputIsRefusedWithTheValueNamed) {
  RunGroup(2, [](ProcessGroup& group) -> std::string {
    auto expect = [](const absl::Status& status, absl::StatusCode code,
                     const std::string& text) -> std::string {
      if (status.code() != code || !absl::StrContains(status.message(), text)) {
        return absl::StrCat("expected ", absl::StatusCodeToString(code), " with '", text,
                            "', got ", status.ToString());
      }
      return "";
    };
    GENESIS_ASSIGN_OR_TEXT(m, storage::Zeros({4, 6}, DType::kFloat32, Device::Cpu()));
    GENESIS_ASSIGN_OR_TEXT(t, m.Transpose(0, 1));
    GENESIS_RETURN_IF_TEXT(expect(group.AllReduce(t, ReduceOp::kSum).status(),
                          absl::StatusCode::kInvalidArgument, "not contiguous"));
    GENESIS_ASSIGN_OR_TEXT(ints, storage::Zeros({4}, DType::kInt32, Device::Cpu()));
    GENESIS_RETURN_IF_TEXT(expect(group.AllReduce(ints, ReduceOp::kAvg).status(),
                          absl::StatusCode::kInvalidArgument, "avg needs a floating dtype"));
    GENESIS_RETURN_IF_TEXT(expect(group.Broadcast(m, 2).status(), absl::StatusCode::kInvalidArgument,
                          "broadcast root 2 is outside [0, 2)"));
    GENESIS_RETURN_IF_TEXT(expect(group.Send(m, -1).status(), absl::StatusCode::kInvalidArgument,
                          "destination rank -1"));
    GENESIS_RETURN_IF_TEXT(expect(group.Send(m, group.rank()).status(),
                          absl::StatusCode::kInvalidArgument, "which is this rank"));
    GENESIS_ASSIGN_OR_TEXT(small, storage::Zeros({5}, DType::kFloat32, Device::Cpu()));
    GENESIS_ASSIGN_OR_TEXT(three, storage::Zeros({3}, DType::kFloat32, Device::Cpu()));
    GENESIS_RETURN_IF_TEXT(expect(group.AllGather(three, small).status(),
                          absl::StatusCode::kInvalidArgument,
                          "all_gather output has 5 elements, expected 6 (world size 2 x input)"));
    // The list form names the output that is wrong.
    GENESIS_ASSIGN_OR_TEXT(halves3, storage::Zeros({3}, DType::kFloat16, Device::Cpu()));
    GENESIS_RETURN_IF_TEXT(expect(group.AllGather(three, {three, small}).status(),
                          absl::StatusCode::kInvalidArgument,
                          "all_gather output 1 has 5 elements, expected 3 (the input's size)"));
    GENESIS_RETURN_IF_TEXT(expect(group.AllGather(three, {Storage(), three}).status(),
                          absl::StatusCode::kInvalidArgument,
                          "all_gather output 0 is an undefined storage"));
    GENESIS_RETURN_IF_TEXT(expect(group.AllGather(three, {three, halves3}).status(),
                          absl::StatusCode::kInvalidArgument,
                          "input is float32 but output is float16"));
    GENESIS_RETURN_IF_TEXT(expect(group.AllGather(three, std::vector<Storage>{three}).status(),
                          absl::StatusCode::kInvalidArgument,
                          "all_gather into 1 storages, expected one per rank (2)"));
    GENESIS_ASSIGN_OR_TEXT(halves, storage::Zeros({6}, DType::kFloat16, Device::Cpu()));
    GENESIS_RETURN_IF_TEXT(expect(group.AllGather(three, halves).status(),
                          absl::StatusCode::kInvalidArgument, "input is float32 but output is float16"));
    GENESIS_RETURN_IF_TEXT(expect(group.ReduceScatter(small, three, ReduceOp::kSum).status(),
                          absl::StatusCode::kInvalidArgument,
                          "reduce_scatter input has 5 elements, expected 6 (world size 2 x output)"));
    GENESIS_RETURN_IF_TEXT(expect(group.AllToAll(three, three).status(),
                          absl::StatusCode::kInvalidArgument, "does not split into 2"));
    GENESIS_RETURN_IF_TEXT(expect(group.AllReduce(Storage(), ReduceOp::kSum).status(),
                          absl::StatusCode::kInvalidArgument, "undefined storage"));
    GENESIS_RETURN_IF_TEXT(expect(group.Split({0, 0}, "x").status(),
                          absl::StatusCode::kInvalidArgument, "listed twice"));
    GENESIS_RETURN_IF_TEXT(expect(group.Split({0, 5}, "x").status(),
                          absl::StatusCode::kInvalidArgument, "split rank 5"));
    // Nothing was queued: a real collective still works afterwards.
    GENESIS_ASSIGN_OR_TEXT(w, group.AllReduce(three, ReduceOp::kSum));
    GENESIS_RETURN_IF_BAD(w.Wait());
    return "";
  });
}

TEST(GlooGroupTest, SymmetricMemoryNeedsAnNcclGroup) {
  RunGroup(1, [](ProcessGroup& group) -> std::string {
    absl::StatusOr<std::shared_ptr<SymmetricWindow>> window = SymmetricWindow::Create(group, 4096);
    if (window.status().code() != absl::StatusCode::kUnimplemented ||
        !absl::StrContains(window.status().message(), "symmetric memory needs an NCCL group")) {
      return absl::StrCat("gloo window: ", window.status().ToString());
    }
    return "";
  });
}

TEST(GlooGroupTest, BadWorldIsRefused) {
  auto store = Store::Hash();
  EXPECT_EQ(CreateGlooGroup(0, 0, store).status().code(), absl::StatusCode::kInvalidArgument);
  absl::Status status = CreateGlooGroup(3, 2, store).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(status.message(), "rank 3 is outside [0, 2)")) << status;
  EXPECT_EQ(CreateGlooGroup(0, 1, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Store::File("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Store::File("/proc/genesis-cannot-be-here").status().code(),
            absl::StatusCode::kPermissionDenied);
}

TEST(GlooGroupTest, TheLastMemberOfASharedStoreRemovesIt) {
  const std::string dir = FreshDirectory("shared-store");
  auto first = Store::File(dir, /*shared=*/true);
  auto second = Store::File(dir, /*shared=*/true);
  ASSERT_TRUE(first.ok() && second.ok());
  ASSERT_TRUE((*first)->Set("key", std::vector<char>{'x'}).ok());
  first->reset();
  EXPECT_TRUE(std::filesystem::exists(dir)) << "removed while a member still uses it";
  EXPECT_TRUE((*second)->Get("key", absl::Seconds(1)).ok());
  second->reset();
  EXPECT_FALSE(std::filesystem::exists(dir));
  // Not shared: the directory stays.
  const std::string kept = FreshDirectory("kept-store");
  { auto store = Store::File(kept); }
  EXPECT_TRUE(std::filesystem::exists(kept));
}

// A member killed before it could leave does not keep the directory, and what it wrote
// is not read by the next job that opens the directory.
TEST(GlooGroupTest, KeysOfDeadMembersAreClearedAndDoNotKeepTheStore) {
  const std::string dir = FreshDirectory("dead-member");
  std::vector<RankOutcome> dead = RunRanks(1, absl::Seconds(30), [&](int) {
    auto store = Store::File(dir, /*shared=*/true);
    if (!store.ok()) return std::string(store.status().ToString());
    if (!(*store)->Set("rank_1", std::vector<char>{'o', 'l', 'd'}).ok()) return std::string("set");
    _exit(0);  // No destructor: as if killed.
  });
  ASSERT_TRUE(dead[0].ok()) << dead[0].Describe();
  ASSERT_TRUE(std::filesystem::exists(dir));
  auto next = Store::File(dir, /*shared=*/true);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ((*next)->Get("rank_1", absl::Milliseconds(100)).status().code(),
            absl::StatusCode::kDeadlineExceeded)
      << "a dead member's key was read by the next job";
  ASSERT_TRUE((*next)->Set("rank_1", std::vector<char>{'n', 'e', 'w'}).ok());
  next->reset();
  EXPECT_FALSE(std::filesystem::exists(dir));
}

// Rank 0 leaves early (its world group destroyed) while ranks 1 and 2 form a sub-group
// through the world's store: the store must outlive rank 0's group.
TEST(GlooGroupTest, ASubGroupFormsAfterRankZeroLeft) {
  const std::string dir = FreshDirectory("early-leaver");
  std::vector<RankOutcome> outcomes = RunRanks(3, absl::Seconds(60), [&](int rank) {
    auto world = GlooWorldByHand(rank, 3, dir, "early-leaver");
    if (!world.ok()) return std::string(world.status().ToString());
    GENESIS_ASSIGN_OR_TEXT(barrier, (*world)->Barrier());
    GENESIS_RETURN_IF_BAD(barrier.Wait());
    if (rank == 0) {
      world->reset();  // Leaves before the others form their sub-group.
      return std::string();
    }
    absl::SleepFor(absl::Milliseconds(200));
    auto pair = (*world)->Split({1, 2}, "late");
    if (!pair.ok()) return std::string(pair.status().ToString());
    GENESIS_ASSIGN_OR_TEXT(s, Filled(3, DType::kFloat32, [&](int64_t i) { return rank + i; }));
    GENESIS_ASSIGN_OR_TEXT(w, (*pair)->AllReduce(s, ReduceOp::kSum));
    GENESIS_RETURN_IF_BAD(w.Wait());
    return Check(s, [](int64_t i) { return 3 + 2 * i; }, "all_reduce of the late sub-group");
  });
  for (const RankOutcome& o : outcomes) EXPECT_TRUE(o.ok()) << o.Describe();
  // Every rank is gone: the last one removed the job's store.
  EXPECT_FALSE(std::filesystem::exists(dir + "/genesis-rendezvous-early-leaver-127.0.0.1-29500"));
}

TEST(GlooGroupTest, OneRankWorldNeedsNoPeers) {
  auto group = CreateGlooGroup(0, 1, Store::Hash());
  ASSERT_TRUE(group.ok()) << group.status();
  auto s = storage::CreateStorage<float>(std::vector<float>{1, 2, 3}, Device::Cpu());
  ASSERT_TRUE(s.ok());
  auto work = (*group)->AllReduce(*s, ReduceOp::kAvg);
  ASSERT_TRUE(work.ok()) << work.status();
  EXPECT_TRUE(work->Wait().ok());
  EXPECT_EQ(*s->ToVector<float>(), (std::vector<float>{1, 2, 3}));
}

// ---- Faults: errors within the timeout, never hangs.

TEST(GlooGroupTest, DeadPeerBecomesAnErrorWithinTheTimeout) {
  const std::string dir = FreshDirectory("store");
  const absl::Duration timeout = absl::Seconds(5);
  std::vector<RankOutcome> outcomes = RunRanks(3, absl::Seconds(60), [&](int rank) {
    auto store = Store::File(dir);
    GroupOptions options;
    options.timeout = timeout;
    auto group = CreateGlooGroup(rank, 3, *store, options);
    if (!group.ok()) return std::string(group.status().ToString());
    // Every rank connected: rank 2 then dies before the collective.
    GENESIS_ASSIGN_OR_TEXT(connected, (*group)->Barrier());
    GENESIS_RETURN_IF_BAD(connected.Wait());
    if (rank == 2) _exit(0);
    GENESIS_ASSIGN_OR_TEXT(s, storage::Zeros({1 << 16}, DType::kFloat32, Device::Cpu()));
    const absl::Time start = absl::Now();
    GENESIS_ASSIGN_OR_TEXT(work, (*group)->AllReduce(s, ReduceOp::kSum));
    absl::Status status = work.Wait();
    if (status.ok()) return std::string("all_reduce with a dead peer succeeded");
    if (absl::Now() - start > timeout + absl::Seconds(2)) {
      return absl::StrCat("the error came after ", absl::FormatDuration(absl::Now() - start));
    }
    for (const char* part : {"all_reduce", "gloo group 'world'", "of 3"}) {
      if (!absl::StrContains(status.message(), part)) {
        return absl::StrCat("error does not name '", part, "': ", status.ToString());
      }
    }
    // The group is unusable after, and says so.
    absl::Status later = (*group)->Barrier().status();
    if (later.code() != absl::StatusCode::kFailedPrecondition ||
        !absl::StrContains(later.message(), "unusable")) {
      return "after the failure: " + later.ToString();
    }
    if ((*group)->health().ok()) return std::string("health() is OK after a failure");
    return std::string();
  });
  for (const RankOutcome& o : outcomes) EXPECT_TRUE(o.ok()) << o.Describe();
}

TEST(GlooGroupTest, MismatchedCollectivesTimeOut) {
  const std::string dir = FreshDirectory("store");
  std::vector<RankOutcome> outcomes = RunRanks(2, absl::Seconds(60), [&](int rank) {
    auto store = Store::File(dir);
    GroupOptions options;
    options.timeout = absl::Seconds(2);
    auto group = CreateGlooGroup(rank, 2, *store, options);
    if (!group.ok()) return std::string(group.status().ToString());
    GENESIS_ASSIGN_OR_TEXT(s, storage::Zeros({1024}, DType::kFloat32, Device::Cpu()));
    // Rank 0 gathers, rank 1 broadcasts: neither can finish.
    auto work = rank == 0 ? (*group)->AllGather(s, *storage::Zeros({2048}, DType::kFloat32, Device::Cpu()))
                          : (*group)->Broadcast(s, 0);
    if (!work.ok()) return std::string(work.status().ToString());
    absl::Status status = work->Wait();
    if (status.ok()) return std::string("mismatched collectives succeeded");
    return std::string();
  });
  for (const RankOutcome& o : outcomes) EXPECT_TRUE(o.ok()) << o.Describe();
}

TEST(GlooGroupTest, AbortFailsPendingAndLaterOperations) {
  auto group = CreateGlooGroup(0, 1, Store::Hash());
  ASSERT_TRUE(group.ok()) << group.status();
  (*group)->Abort(absl::CancelledError("shutting down"));
  absl::Status status = (*group)->Barrier().status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(status.message(), "shutting down")) << status;
}

// ---- From the launcher's environment.

TEST(GlooGroupTest, FromTorchrunEnvironment) {
  const std::string dir = FreshDirectory("env-store");
  std::vector<RankOutcome> outcomes = RunRanks(2, absl::Seconds(60), [&](int rank) {
    auto group = GlooWorldByHand(rank, 2, dir, /*run_id=*/"");
    if (!group.ok()) return std::string(group.status().ToString());
    if ((*group)->rank() != rank || (*group)->size() != 2) return std::string("wrong rank");
    if ((*group)->info().timeout != absl::Seconds(20)) return std::string("timeout not read");
    GENESIS_ASSIGN_OR_TEXT(s, Filled(3, DType::kFloat32, [&](int64_t i) { return rank + i; }));
    GENESIS_ASSIGN_OR_TEXT(w, (*group)->AllReduce(s, ReduceOp::kSum));
    GENESIS_RETURN_IF_BAD(w.Wait());
    return Check(s, [](int64_t i) { return 1 + 2 * i; }, "all_reduce from the environment");
  });
  for (const RankOutcome& o : outcomes) EXPECT_TRUE(o.ok()) << o.Describe();
}

TEST(GlooGroupTest, EnvironmentErrorsNameTheVariable) {
  LaunchEnv env;
  env.world_size = 2;
  env.local_world_size = 1;  // Two hosts.
  env.master_addr = "10.0.0.1";
  env.master_port = 29500;
  auto none = [](std::string_view) -> std::optional<std::string> { return std::nullopt; };
  absl::Status status = ProcessGroupFromEnvironment(Backend::kGloo, env, none).status();
  EXPECT_TRUE(absl::StrContains(status.message(), "GENESIS_STORE_DIR")) << status;
  auto bad_timeout = [](std::string_view name) -> std::optional<std::string> {
    if (name == "GENESIS_DISTRIBUTED_TIMEOUT") return std::string("soon");
    return std::nullopt;
  };
  status = ProcessGroupFromEnvironment(Backend::kGloo, env, bad_timeout).status();
  EXPECT_TRUE(absl::StrContains(status.message(), "GENESIS_DISTRIBUTED_TIMEOUT='soon'"))
      << status;
  auto bad_blocking = [](std::string_view name) -> std::optional<std::string> {
    if (name == "GENESIS_NCCL_BLOCKING") return std::string("yes");
    return std::nullopt;
  };
  status = ProcessGroupFromEnvironment(Backend::kNccl, env, bad_blocking).status();
  EXPECT_TRUE(absl::StrContains(status.message(), "GENESIS_NCCL_BLOCKING='yes'")) << status;
  auto bad_register = [](std::string_view name) -> std::optional<std::string> {
    if (name == "GENESIS_NCCL_REGISTER") return std::string("yes");
    return std::nullopt;
  };
  status = ProcessGroupFromEnvironment(Backend::kNccl, env, bad_register).status();
  EXPECT_TRUE(absl::StrContains(status.message(),
                                "GENESIS_NCCL_REGISTER='yes' is not 0, 1, off, on or auto"))
      << status;
  for (const char* value : {"yes", "-1", "4194305"}) {
    auto bad_one_shot = [&](std::string_view name) -> std::optional<std::string> {
      if (name == "GENESIS_NCCL_ONE_SHOT_BYTES") return std::string(value);
      return std::nullopt;
    };
    status = ProcessGroupFromEnvironment(Backend::kNccl, env, bad_one_shot).status();
    EXPECT_TRUE(absl::StrContains(status.message(),
                                  absl::StrCat("GENESIS_NCCL_ONE_SHOT_BYTES='", value,
                                               "' is not a number of bytes from 0 to 4194304")))
        << status;
  }
  for (const char* value : {"big", "-1"}) {
    auto bad_copy_engine = [&](std::string_view name) -> std::optional<std::string> {
      if (name == "GENESIS_NCCL_COPY_ENGINE_BYTES") return std::string(value);
      return std::nullopt;
    };
    status = ProcessGroupFromEnvironment(Backend::kNccl, env, bad_copy_engine).status();
    EXPECT_TRUE(absl::StrContains(
        status.message(),
        absl::StrCat("GENESIS_NCCL_COPY_ENGINE_BYTES='", value, "' is not a number of bytes")))
        << status;
  }
}

// A one-shot size beyond the limit is refused before anything connects.
TEST(GlooGroupTest, NcclOneShotSizeBeyondItsLimitIsRefusedFirst) {
  LaunchEnv env;
  env.rank = 0;
  env.world_size = 2;
  env.local_world_size = 2;
  env.master_addr = "127.0.0.1";
  env.master_port = 29500;
  auto none = [](std::string_view) -> std::optional<std::string> { return std::nullopt; };
  GroupOptions options;
  options.nccl_one_shot_bytes = (size_t{4} << 20) + 1;
  absl::Status status = ProcessGroupFromEnvironment(Backend::kNccl, env, none, options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_TRUE(
      absl::StrContains(status.message(), "nccl_one_shot_bytes = 4194305 (at most 4194304)"))
      << status;
}

// The one-shot collectives' counters are an NCCL group's.
TEST(GlooGroupTest, OneShotStatsAreNcclOnly) {
  const std::string dir = testing::FreshDirectory("gloo-one-shot");
  auto store = Store::File(dir);
  ASSERT_TRUE(store.ok()) << store.status();
  auto group = CreateGlooGroup(0, 1, *store);
  ASSERT_TRUE(group.ok()) << group.status();
  absl::StatusOr<nccl_backend::OneShotStats> stats = NcclOneShot(**group);
  EXPECT_FALSE(stats.ok());
  EXPECT_TRUE(absl::StrContains(stats.status().message(), "gloo group 'world'")) << stats.status();
}

}  // namespace
}  // namespace genesis::distributed
