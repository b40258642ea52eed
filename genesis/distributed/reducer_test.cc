// The Reducer over Gloo between forked processes: buckets start as soon as they are
// complete and in plan order whatever order gradients come in, results over several
// steps, and bad input (marks twice, out of range, never, plans that differ).
#include "genesis/distributed/reducer.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "genesis/core/dtype.h"
#include "genesis/distributed/process_group.h"
#include "genesis/distributed/process_group_factory.h"
#include "genesis/distributed/store.h"
#include "genesis/distributed/testing/collective_checks.h"
#include "genesis/distributed/testing/multi_process.h"
#include "genesis/storage/storage.h"
#include "gtest/gtest.h"

namespace genesis::distributed {
namespace {

using storage::Storage;
using testing::Check;
using testing::Filled;
using testing::FreshDirectory;
using testing::RankOutcome;
using testing::RunRanks;

// Runs `body(group)` on `n` ranks of a fresh Gloo group; expects every rank to succeed.
void RunGroup(int n, const std::function<std::string(ProcessGroup&)>& body) {
  const std::string dir = FreshDirectory("store");
  std::vector<RankOutcome> outcomes = RunRanks(n, absl::Seconds(120), [&](int rank) {
    absl::StatusOr<std::shared_ptr<Store>> store = Store::File(dir);
    if (!store.ok()) return std::string(store.status().message());
    GroupOptions options;
    options.timeout = absl::Seconds(20);
    auto group = CreateGlooGroup(rank, n, *store, options);
    if (!group.ok()) return std::string(group.status().ToString());
    return body(**group);
  });
  for (const RankOutcome& o : outcomes) EXPECT_TRUE(o.ok()) << o.Describe();
}

// Gradient k of a model: 40 separate storages of uneven sizes and dtypes, then 20 views
// of one flat buffer (in-place buckets), then 10 more separate ones.
struct Model {
  std::vector<Storage> grads;
  Storage flat;
};

absl::StatusOr<Model> MakeModel() {
  Model m;
  for (int k = 0; k < 40; ++k) {
    const DType dtype = k % 9 == 0 ? DType::kBFloat16 : DType::kFloat32;
    GENESIS_ASSIGN_OR_RETURN(Storage g, storage::Zeros({1 + (k * 37) % 300}, dtype, Device::Cpu()));
    m.grads.push_back(g);
  }
  GENESIS_ASSIGN_OR_RETURN(m.flat, storage::Zeros({20 * 64}, DType::kFloat32, Device::Cpu()));
  for (int k = 0; k < 20; ++k) {
    GENESIS_ASSIGN_OR_RETURN(Storage v, m.flat.Slice(0, 64 * k, 64 * (k + 1)));
    m.grads.push_back(v);
  }
  for (int k = 0; k < 10; ++k) {
    GENESIS_ASSIGN_OR_RETURN(Storage g, storage::Zeros({5 + 50 * k}, DType::kFloat32, Device::Cpu()));
    m.grads.push_back(g);
  }
  return m;
}

// What rank r's gradient k holds at element i in step s.
double Value(int step, int rank, size_t k, int64_t i) {
  return step + rank + static_cast<double>(k % 5) + static_cast<double>(i % 4);
}

absl::Status Fill(Storage& g, const std::function<double(int64_t)>& f) {
  GENESIS_ASSIGN_OR_RETURN(Storage values, Filled(g.numel(), g.dtype(), f));
  return g.CopyFrom(values);
}

TEST(ReducerTest, BucketsStartInPlanOrderAndSumOverSteps) {
  constexpr int kRanks = 3;
  RunGroup(kRanks, [](ProcessGroup& group) -> std::string {
    const int r = group.rank();
    GENESIS_ASSIGN_OR_TEXT(model, MakeModel());
    // A tapered tail: the last two gradients (1,820 and 1,620 bytes) are past their
    // tail buckets' limits (256 and 512 bytes), so each has a bucket of its own
    // (without the taper the one before the last shares a bucket with the 1,420 before it).
    GENESIS_ASSIGN_OR_TEXT(reducer,
                           Reducer::Create(group, model.grads, ReduceOp::kSum,
                                           {.bucket_bytes = 4096, .last_bucket_bytes = 256}));
    const std::vector<Bucket>& buckets = reducer->buckets();
    if (buckets.size() < 8) return absl::StrCat("only ", buckets.size(), " buckets");
    const size_t n = model.grads.size();
    if (buckets.back().members != std::vector<size_t>{n - 1} ||
        buckets[buckets.size() - 2].members != std::vector<size_t>{n - 2}) {
      return "the tail is not tapered";
    }
    if (std::none_of(buckets.begin(), buckets.end(), [](const Bucket& b) { return b.in_place; })) {
      return "no in-place bucket";
    }
    // Each rank marks gradients in an order of its own; buckets must still start in
    // plan order, and only once complete.
    std::mt19937 random(11 + r);
    for (int step = 0; step < 3; ++step) {
      std::vector<size_t> order(model.grads.size());
      std::iota(order.begin(), order.end(), 0);
      if (step > 0) std::shuffle(order.begin(), order.end(), random);
      std::vector<bool> marked(model.grads.size(), false);
      for (size_t k : order) {
        Storage& g = model.grads[k];
        GENESIS_RETURN_IF_BAD(Fill(g, [&](int64_t i) { return Value(step, r, k, i); }));
        GENESIS_RETURN_IF_BAD(reducer->MarkReady(k));
        marked[k] = true;
        // The buckets that must have started: every one whose members, and those of
        // every bucket before it, are marked.
        size_t expected = 0;
        while (expected < buckets.size() &&
               std::all_of(buckets[expected].members.begin(), buckets[expected].members.end(),
                           [&](size_t m) { return marked[m]; })) {
          ++expected;
        }
        if (reducer->started() != expected) {
          return absl::StrCat("step ", step, " after gradient ", k, ": ", reducer->started(),
                              " buckets started, expected ", expected);
        }
      }
      GENESIS_ASSIGN_OR_TEXT(work, reducer->Finish());
      GENESIS_RETURN_IF_BAD(work.Wait());
      if (reducer->started() != 0) return "Finish did not begin a new step";
      for (size_t k = 0; k < model.grads.size(); ++k) {
        GENESIS_RETURN_IF_TEXT(Check(
            model.grads[k],
            [&](int64_t i) {
              double sum = 0;
              for (int rank = 0; rank < kRanks; ++rank) sum += Value(step, rank, k, i);
              return sum;
            },
            absl::StrCat("step ", step, ", gradient ", k)));
      }
    }
    return "";
  });
}

TEST(ReducerTest, AvgOfOneBucketPerGradient) {
  RunGroup(2, [](ProcessGroup& group) -> std::string {
    std::vector<Storage> grads;
    for (int k = 0; k < 4; ++k) {
      GENESIS_ASSIGN_OR_TEXT(g, Filled(1000, DType::kFloat32,
                                       [&](int64_t i) { return 2.0 * group.rank() + k + i; }));
      grads.push_back(g);
    }
    GENESIS_ASSIGN_OR_TEXT(reducer,
                           Reducer::Create(group, grads, ReduceOp::kAvg, {.bucket_bytes = 1}));
    if (reducer->buckets().size() != 4) return "expected one bucket per gradient";
    for (size_t k : {3, 2, 1, 0}) GENESIS_RETURN_IF_BAD(reducer->MarkReady(k));
    GENESIS_ASSIGN_OR_TEXT(work, reducer->Finish());
    GENESIS_RETURN_IF_BAD(work.Wait());
    for (int k = 0; k < 4; ++k) {
      GENESIS_RETURN_IF_TEXT(Check(grads[k], [&](int64_t i) { return 1.0 + k + i; },
                                   absl::StrCat("gradient ", k)));
    }
    return "";
  });
}

// Every rank makes the same mistakes, so their collectives still line up.
TEST(ReducerTest, BadMarksAreRefusedNamingTheGradient) {
  RunGroup(2, [](ProcessGroup& group) -> std::string {
    GENESIS_ASSIGN_OR_TEXT(model, MakeModel());
    const size_t n = model.grads.size();
    GENESIS_ASSIGN_OR_TEXT(reducer, Reducer::Create(group, model.grads, ReduceOp::kSum,
                                                    {.bucket_bytes = 2048}));
    absl::Status s = reducer->MarkReady(n);
    if (s.code() != absl::StatusCode::kOutOfRange ||
        !absl::StrContains(s.message(), absl::StrCat("gradient ", n, " of ", n))) {
      return absl::StrCat("out of range: ", s.ToString());
    }
    GENESIS_RETURN_IF_BAD(reducer->MarkReady(0));
    s = reducer->MarkReady(0);
    if (s.code() != absl::StatusCode::kFailedPrecondition ||
        !absl::StrContains(s.message(), "gradient 0 was already marked ready")) {
      return absl::StrCat("twice: ", s.ToString());
    }
    // Gradients 7 and n - 1 never marked: Finish names them and starts nothing more.
    for (size_t k = 1; k < n - 1; ++k) {
      if (k != 7) GENESIS_RETURN_IF_BAD(reducer->MarkReady(k));
    }
    absl::StatusOr<Work> finished = reducer->Finish();
    if (finished.status().code() != absl::StatusCode::kFailedPrecondition ||
        !absl::StrContains(finished.status().message(),
                           absl::StrCat("2 of ", n, " gradients never marked ready in this "
                                        "step: 7, ", n - 1))) {
      return absl::StrCat("never: ", finished.status().ToString());
    }
    // The next step starts afresh and completes.
    for (size_t k = 0; k < n; ++k) GENESIS_RETURN_IF_BAD(reducer->MarkReady(k));
    GENESIS_ASSIGN_OR_TEXT(work, reducer->Finish());
    GENESIS_RETURN_IF_BAD(work.Wait());
    return "";
  });
}

TEST(ReducerTest, PlansThatDifferAcrossRanksAreRefused) {
  RunGroup(2, [](ProcessGroup& group) -> std::string {
    GENESIS_ASSIGN_OR_TEXT(model, MakeModel());
    std::vector<Storage> grads = model.grads;
    if (group.rank() == 1) grads.pop_back();  // One gradient short.
    absl::StatusOr<std::unique_ptr<Reducer>> reducer =
        Reducer::Create(group, grads, ReduceOp::kSum);
    if (reducer.status().code() != absl::StatusCode::kFailedPrecondition ||
        !absl::StrContains(reducer.status().message(), "bucket plan differs across ranks") ||
        !absl::StrContains(reducer.status().message(),
                           absl::StrCat(grads.size(), " gradients"))) {
      return absl::StrCat("differing plans: ", reducer.status().ToString());
    }
    // Separate storages on one rank, views of one buffer on the other: the buckets'
    // sizes differ (packing pads), so the plans differ too.
    std::vector<Storage> layout_grads;
    GENESIS_ASSIGN_OR_TEXT(flat, storage::Zeros({3 * 5}, DType::kFloat32, Device::Cpu()));
    for (int k = 0; k < 3; ++k) {
      if (group.rank() == 0) {
        GENESIS_ASSIGN_OR_TEXT(v, flat.Slice(0, 5 * k, 5 * (k + 1)));
        layout_grads.push_back(v);
      } else {
        GENESIS_ASSIGN_OR_TEXT(g, storage::Zeros({5}, DType::kFloat32, Device::Cpu()));
        layout_grads.push_back(g);
      }
    }
    reducer = Reducer::Create(group, layout_grads, ReduceOp::kSum);
    if (reducer.status().code() != absl::StatusCode::kFailedPrecondition) {
      return absl::StrCat("differing layouts: ", reducer.status().ToString());
    }
    return "";
  });
}

TEST(ReducerTest, CreateRefusesNoGradientsAndUndefinedOnes) {
  RunGroup(1, [](ProcessGroup& group) -> std::string {
    absl::StatusOr<std::unique_ptr<Reducer>> r = Reducer::Create(group, {}, ReduceOp::kSum);
    if (r.status().code() != absl::StatusCode::kInvalidArgument) {
      return absl::StrCat("no gradients: ", r.status().ToString());
    }
    r = Reducer::Create(group, {Storage()}, ReduceOp::kSum);
    if (r.status().code() != absl::StatusCode::kInvalidArgument) {
      return absl::StrCat("undefined gradient: ", r.status().ToString());
    }
    GENESIS_ASSIGN_OR_TEXT(flags, storage::Zeros({8}, DType::kBool, Device::Cpu()));
    r = Reducer::Create(group, {flags}, ReduceOp::kAvg);
    if (r.status().code() != absl::StatusCode::kInvalidArgument ||
        !absl::StrContains(r.status().message(), "bucket of gradients 0..0")) {
      return absl::StrCat("avg of bool: ", r.status().ToString());
    }
    return "";
  });
}

}  // namespace
}  // namespace genesis::distributed
