// A data-parallel training step as a C++ engine writes it with genesis/distributed, and
// the check that a launcher's job works end to end:
//
//   torchrun --no-python --nproc_per_node=2 data_parallel_step --backend=nccl
//   torchrun --no-python --nproc_per_node=4 data_parallel_step --backend=gloo
//   srun -n 8 data_parallel_step --backend=nccl            # with MASTER_ADDR exported
//
// Each rank joins the world group from the launcher's environment, makes 1,000
// "gradients" (rank-dependent values), averages them with bucketed all_reduce, checks
// every value, and runs a broadcast and an all_gather of its parameters. Prints one line
// per rank and exits non-zero if anything was wrong.
//
// --every_op then runs every other operation once and checks each result (reduce,
// reduce_scatter, all_to_all, send/recv around the ring, barrier, all_reduce with min,
// max and prod), as the launch checks across hosts do.
//
// Faults on purpose: --kill_rank=R makes rank R kill itself (SIGKILL) after the
// all_reduce, in the attempt --kill_attempt (torchrun's TORCHELASTIC_RESTART_COUNT; 0
// by default), so that the others meet a dead peer mid-step and a restarted job does not.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "genesis/core/absl_compat.h"
#include "genesis/core/status.h"
#include "genesis/distributed/bucketed.h"
#include "genesis/distributed/process_group_factory.h"
#include "genesis/storage/storage.h"

ABSL_FLAG(std::string, backend, "nccl", "nccl (GPU storages) or gloo (CPU storages)");
ABSL_FLAG(int, gradients, 1000, "gradients per step");
ABSL_FLAG(bool, every_op, false,
          "after the step, run and check every other operation too (reduce, reduce_scatter, "
          "all_to_all, send/recv around the ring, barrier, all_reduce with min, max, prod)");
ABSL_FLAG(int, kill_rank, -1, "this rank kills itself (SIGKILL) after the all_reduce");
ABSL_FLAG(int, kill_attempt, 0, "...in this attempt (TORCHELASTIC_RESTART_COUNT) only");

namespace {

using genesis::DType;
using genesis::storage::Storage;
namespace dist = genesis::distributed;

absl::Status Step(dist::ProcessGroup& world) {
  const int rank = world.rank();
  const int n = world.size();
  std::vector<Storage> grads;
  for (int k = 0; k < absl::GetFlag(FLAGS_gradients); ++k) {
    // Rank r's gradient k holds r + k % 10; the average is (n - 1) / 2 + k % 10.
    GENESIS_ASSIGN_OR_RETURN(Storage g, genesis::storage::Full({1 + (k * 61) % 4096},
                                                                rank + k % 10, DType::kFloat32,
                                                                world.device()));
    grads.push_back(g);
  }
  GENESIS_ASSIGN_OR_RETURN(dist::Work work,
                           dist::BucketedAllReduce(world, grads, dist::ReduceOp::kAvg));
  GENESIS_RETURN_IF_ERROR(work.Wait());
  for (size_t k = 0; k < grads.size(); ++k) {
    GENESIS_ASSIGN_OR_RETURN(std::vector<float> v, grads[k].ToVector<float>());
    const float want = (n - 1) / 2.0f + k % 10;
    for (float x : v) {
      if (x != want) {
        return absl::InternalError(
            absl::StrCat("gradient ", k, " holds ", x, ", expected ", want));
      }
    }
  }
  if (rank == absl::GetFlag(FLAGS_kill_rank)) {
    const char* attempt = std::getenv("TORCHELASTIC_RESTART_COUNT");
    if ((attempt != nullptr ? std::atoi(attempt) : 0) == absl::GetFlag(FLAGS_kill_attempt)) {
      std::fprintf(stderr, "rank %d: killing itself mid-step (--kill_rank)\n", rank);
      std::fflush(stderr);
      raise(SIGKILL);
    }
  }
  // Parameters: rank 0's go to everyone; then everyone's step count is gathered.
  GENESIS_ASSIGN_OR_RETURN(Storage params, genesis::storage::Full({1024}, rank == 0 ? 3.5 : -1,
                                                                   DType::kBFloat16,
                                                                   world.device()));
  GENESIS_ASSIGN_OR_RETURN(dist::Work b, world.Broadcast(params, 0));
  GENESIS_RETURN_IF_ERROR(b.Wait());
  GENESIS_ASSIGN_OR_RETURN(Storage as_float, params.To(DType::kFloat32));
  GENESIS_ASSIGN_OR_RETURN(std::vector<float> p, as_float.ToVector<float>());
  if (p.front() != 3.5f || p.back() != 3.5f) {
    return absl::InternalError("broadcast parameters differ from rank 0's");
  }
  GENESIS_ASSIGN_OR_RETURN(Storage mine, genesis::storage::Full({1}, rank, DType::kInt64,
                                                                 world.device()));
  GENESIS_ASSIGN_OR_RETURN(Storage all, genesis::storage::Zeros({n}, DType::kInt64,
                                                                 world.device()));
  GENESIS_ASSIGN_OR_RETURN(dist::Work g, world.AllGather(mine, all));
  GENESIS_RETURN_IF_ERROR(g.Wait());
  GENESIS_ASSIGN_OR_RETURN(std::vector<int64_t> ranks, all.ToVector<int64_t>());
  for (int i = 0; i < n; ++i) {
    if (ranks[i] != i) return absl::InternalError("all_gather of the ranks is out of order");
  }
  return absl::OkStatus();
}

// A float32 storage of `n` elements holding f(i) on the group's device.
absl::StatusOr<Storage> Make(dist::ProcessGroup& world, int64_t n,
                             const std::function<float(int64_t)>& f) {
  std::vector<float> values(n);
  for (int64_t i = 0; i < n; ++i) values[i] = f(i);
  return genesis::storage::CreateStorage(values.data(), {n}, DType::kFloat32, world.device());
}

// InternalError naming `what` unless `s` holds f(i) everywhere.
absl::Status Expect(const Storage& s, const std::function<float(int64_t)>& f,
                    const std::string& what) {
  GENESIS_ASSIGN_OR_RETURN(std::vector<float> v, s.ToVector<float>());
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] != f(static_cast<int64_t>(i))) {
      return absl::InternalError(absl::StrCat(what, ": element ", i, " holds ", v[i],
                                              ", expected ", f(static_cast<int64_t>(i))));
    }
  }
  return absl::OkStatus();
}

absl::Status Finish(absl::StatusOr<dist::Work> work) {
  GENESIS_RETURN_IF_ERROR(work.status());
  return work->Wait();
}

// Every operation of the group once, each result checked (--every_op).
absl::Status EveryOp(dist::ProcessGroup& world) {
  const int r = world.rank();
  const int n = world.size();
  constexpr int64_t kChunk = 4099;  // Odd, so no operation gets a round size.
  for (dist::ReduceOp op : {dist::ReduceOp::kMin, dist::ReduceOp::kMax, dist::ReduceOp::kProd}) {
    GENESIS_ASSIGN_OR_RETURN(Storage x, Make(world, kChunk, [&](int64_t i) {
                               return static_cast<float>(1 + (r + i) % 3);
                             }));
    GENESIS_RETURN_IF_ERROR(Finish(world.AllReduce(x, op)));
    GENESIS_RETURN_IF_ERROR(Expect(
        x,
        [&](int64_t i) {
          float acc = op == dist::ReduceOp::kProd ? 1 : (op == dist::ReduceOp::kMin ? 9 : 0);
          for (int q = 0; q < n; ++q) {
            const float v = static_cast<float>(1 + (q + i) % 3);
            acc = op == dist::ReduceOp::kProd ? acc * v
                  : op == dist::ReduceOp::kMin ? std::min(acc, v)
                                               : std::max(acc, v);
          }
          return acc;
        },
        absl::StrCat("all_reduce (", genesis::ToAbsl(dist::ReduceOpName(op)), ")")));
  }
  const float ranks_sum = n * (n - 1) / 2.0f;
  GENESIS_ASSIGN_OR_RETURN(Storage red, Make(world, kChunk, [&](int64_t i) { return r + i % 7; }));
  GENESIS_RETURN_IF_ERROR(Finish(world.Reduce(red, n - 1, dist::ReduceOp::kSum)));
  GENESIS_RETURN_IF_ERROR(Expect(
      red, [&](int64_t i) { return r == n - 1 ? ranks_sum + n * (i % 7) : r + i % 7; },
      "reduce to the last rank"));
  GENESIS_ASSIGN_OR_RETURN(Storage whole,
                           Make(world, kChunk * n, [&](int64_t i) { return r + i; }));
  GENESIS_ASSIGN_OR_RETURN(Storage mine, Make(world, kChunk, [](int64_t) { return 0; }));
  GENESIS_RETURN_IF_ERROR(Finish(world.ReduceScatter(whole, mine, dist::ReduceOp::kSum)));
  GENESIS_RETURN_IF_ERROR(Expect(
      mine, [&](int64_t i) { return ranks_sum + n * static_cast<float>(r * kChunk + i); },
      "reduce_scatter"));
  // all_to_all: chunk j of rank r holds 100 r + j; chunk i received comes from rank i.
  GENESIS_ASSIGN_OR_RETURN(Storage out_a, Make(world, kChunk * n, [&](int64_t i) {
                             return static_cast<float>(100 * r + i / kChunk);
                           }));
  GENESIS_ASSIGN_OR_RETURN(Storage in_a, Make(world, kChunk * n, [](int64_t) { return -1; }));
  GENESIS_RETURN_IF_ERROR(Finish(world.AllToAll(out_a, in_a)));
  GENESIS_RETURN_IF_ERROR(Expect(
      in_a, [&](int64_t i) { return static_cast<float>(100 * (i / kChunk) + r); },
      "all_to_all"));
  if (n > 1) {  // Around the ring: send to the next rank, receive from the previous one.
    GENESIS_ASSIGN_OR_RETURN(Storage send, Make(world, kChunk, [&](int64_t i) { return r * 1000 + i; }));
    GENESIS_ASSIGN_OR_RETURN(Storage recv, Make(world, kChunk, [](int64_t) { return -1; }));
    const int next = (r + 1) % n;
    const int prev = (r + n - 1) % n;
    std::vector<dist::StoragePeerOp> ops = {{dist::PeerOp::Kind::kSend, send, next, 5},
                                            {dist::PeerOp::Kind::kRecv, recv, prev, 5}};
    GENESIS_RETURN_IF_ERROR(Finish(world.SendRecv(ops)));
    GENESIS_RETURN_IF_ERROR(
        Expect(recv, [&](int64_t i) { return prev * 1000.0f + i; }, "send/recv ring"));
  }
  return Finish(world.Barrier());
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const dist::Backend backend =
      absl::GetFlag(FLAGS_backend) == "gloo" ? dist::Backend::kGloo : dist::Backend::kNccl;
  absl::StatusOr<std::unique_ptr<dist::ProcessGroup>> world =
      dist::ProcessGroupFromEnvironment(backend);
  if (!world.ok()) {
    std::fprintf(stderr, "cannot join the world group: %s\n", world.status().ToString().c_str());
    return 1;
  }
  absl::Status status = Step(**world);
  if (status.ok() && absl::GetFlag(FLAGS_every_op)) status = EveryOp(**world);
  std::printf("rank %d of %d (%s on %s): %s%s\n", (*world)->rank(), (*world)->size(),
              (*world)->backend().c_str(), (*world)->device().ToString().c_str(),
              status.ok() ? "data-parallel step ok" : status.ToString().c_str(),
              status.ok() && absl::GetFlag(FLAGS_every_op) ? " (and every operation)" : "");
  return status.ok() ? 0 : 1;
}
