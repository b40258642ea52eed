// Collectives of genesis process groups beside their baselines, nccl-tests style: for
// each operation and size (8 B to 1 GiB, doubling), the time per operation, algorithm
// bandwidth and bus bandwidth of genesis's group and of NCCL called directly on
// cudaMalloc buffers in the same processes, and their ratio; then bucketed all_reduce
// of 1,000 gradients (100 MiB in all) against one all_reduce of a flat 100 MiB, with
// what its parts cost alone (four all_reduces of a quarter; packing and unpacking) and
// the host's time to queue each, and (NCCL) NCCL called directly on the same gradients,
// each a buffer of its own, in NCCL groups instead of packed buckets.
//
//   collectives_benchmark --backend=nccl --nproc=2          # forks one rank per GPU
//   torchrun --no-python --nproc_per_node=2 collectives_benchmark --backend=nccl
//   collectives_benchmark --backend=gloo --nproc=4 --max_bytes=64MiB
//
// NCCL rows time --iters operations issued back to back (the mean, as nccl-tests). CPU
// (Gloo) rows time each operation alone and keep the median one, for genesis and for Gloo
// called directly: where a machine has fewer cores than the ranks' threads, Gloo's own
// event loop can hold a core for a scheduler tick (a few milliseconds) now and then, and
// those stalls, which fall on either side, would otherwise decide the ratio.
//
// Rank 0 prints the table; --benchmark_out=FILE also writes it as Google Benchmark JSON
// (names "<op>/<genesis|nccl>/<bytes>", counters algbw_GBps and busbw_GBps), which
// `genesis bench` reads. benchmarks/distributed/torch_collectives.py prints the same
// table for torch.distributed.
//
// --register=off|auto|on chooses which of the group's operations run on buffers
// registered with NCCL (auto by default, as in GroupOptions: all_gather of 16 to 64 MiB,
// all_to_all of 4 to 64 MiB, messages of 2 to 64 MiB; GENESIS_NCCL_REGISTER overrides it): the
// operations work on slices at the start of
// two large pool storages, so sizes up to a piece of the pool's expandable segments run
// on registered pool memory, and larger ones through the group's registered staging
// area. Rank 0 prints the registration counters at the end. Compare runs with off.
// --symmetric puts genesis's buffers in symmetric memory (one NCCL window,
// distributed/symmetric_window.h), where NCCL runs its symmetric kernels.
// --baseline_memory=nccl_registered runs the NCCL baseline on ncclMemAlloc buffers
// registered with the communicator (NCCL's own zero-copy path) instead of cudaMalloc
// ones, --baseline_memory=nccl_window in one symmetric window (NCCL's symmetric
// kernels, as --symmetric gives genesis), --baseline_memory=pool on storages of
// genesis's device pool.
// --second_baseline_memory=nccl_window (or cudamalloc, nccl_registered) times NCCL a
// second time in the same run, on a communicator and buffers of its own, right after the
// first baseline: so NCCL's symmetric kernels and its ordinary ones are compared within
// one run, as the runs of these machines differ by more than the two.
// --baseline_comm=split makes the baseline's communicator as genesis makes the one its
// operations run on (a blocking split of a non-blocking communicator) instead of by
// ncclCommInitRank. Both sides start their clocks after a barrier across the ranks.
// Rank 0 first prints how long creating the group took.
#include <algorithm>
#include <cmath>
#include <functional>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "benchmarks/distributed/fork_ranks.h"
#include "benchmarks/distributed/raw_gloo.h"
#include "benchmarks/distributed/raw_nccl.h"
#include "genesis/core/byte_size.h"
#include "genesis/cuda/graph.h"
#include "genesis/cuda/stream.h"
#include "genesis/distributed/bucketed.h"
#include "genesis/distributed/process_group_factory.h"
#include "genesis/distributed/symmetric_window.h"
#include "genesis/transfer/batch_copy.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(std::string, backend, "nccl", "nccl (GPU storages) or gloo (CPU storages)");
ABSL_FLAG(int, nproc, 0,
          "ranks to fork when no launcher started this process (0: one per GPU for nccl, "
          "2 for gloo)");
ABSL_FLAG(std::string, ops, "all_reduce,all_gather,reduce_scatter,broadcast,reduce,all_to_all,send_recv",
          "operations to measure, comma-separated");
ABSL_FLAG(std::string, min_bytes, "8", "smallest size");
ABSL_FLAG(std::string, max_bytes, "1GiB", "largest size");
ABSL_FLAG(int, step_factor, 2, "sizes grow by this factor");
ABSL_FLAG(int, iters, 20, "timed operations per size");
ABSL_FLAG(int, warmup, 5, "untimed operations per size first");
ABSL_FLAG(bool, baseline, true, "measure NCCL called directly beside genesis (nccl backend)");
ABSL_FLAG(bool, baseline_events, false,
          "the NCCL baseline records an event after each operation, as genesis does, to "
          "tell the event's cost from the rest of genesis's");
ABSL_FLAG(std::string, baseline_memory, "cudamalloc",
          "the NCCL baseline's buffers: cudamalloc, or nccl_registered (ncclMemAlloc, each "
          "registered with ncclCommRegister: NCCL's zero-copy path), nccl_window (one "
          "ncclMemAlloc in a symmetric window: NCCL's symmetric kernels), or pool (two "
          "storages of genesis's device pool, as genesis's operations use, not registered)");
ABSL_FLAG(std::string, second_baseline_memory, "",
          "nccl: also time NCCL called directly on buffers of this kind (cudamalloc, "
          "nccl_registered or nccl_window), on a communicator of its own, right after the "
          "first baseline in every repetition, printed beside it");
ABSL_FLAG(std::string, baseline_comm, "init_rank",
          "how the NCCL baseline's communicator is made: init_rank (ncclCommInitRank, as "
          "nccl-tests) or split (a blocking ncclCommSplit of a non-blocking communicator, "
          "as genesis's groups make the one their operations run on)");
ABSL_FLAG(bool, bucketed, true, "measure bucketed all_reduce of 1,000 gradients");
ABSL_FLAG(std::string, register, "auto",
          "nccl: which operations run on buffers registered with NCCL: off, auto (all_gather "
          "of 16 to 64 MiB, all_to_all of 4 to 64 MiB, messages of 2 to 64 MiB) or on "
          "(GroupOptions::nccl_registration; GENESIS_NCCL_REGISTER overrides it)");
ABSL_FLAG(bool, symmetric, false,
          "genesis's buffers in symmetric memory (an NCCL window: symmetric_window.h)");
ABSL_FLAG(int, graph_ops, 0,
          "nccl: also time this many all_reduces of --graph_bytes issued eagerly and "
          "captured into one CUDA graph, genesis and NCCL called directly (0: off)");
ABSL_FLAG(std::string, graph_bytes, "8KiB", "size of each all_reduce of --graph_ops");
ABSL_FLAG(int, graph_replays, 50, "replays (and eager rounds) of --graph_ops");
ABSL_FLAG(std::string, benchmark_out, "", "also write the results here as Google Benchmark JSON");
ABSL_FLAG(int, benchmark_repetitions, 1,
          "measurements per size (the table shows their median; the JSON holds each)");
// Accepted so that `genesis bench` runs this binary like its Google Benchmark ones.
ABSL_FLAG(std::string, benchmark_out_format, "json", "only json");
ABSL_FLAG(bool, benchmark_display_aggregates_only, false, "ignored");
ABSL_FLAG(std::string, benchmark_min_time, "", "ignored: --iters sets the work per size");
ABSL_FLAG(std::string, benchmark_filter, "", "ignored: --ops picks the operations");

namespace genesis::benchmarks {
namespace {

using distributed::ProcessGroup;
using distributed::ReduceOp;
using distributed::Work;
using storage::Storage;

double BusFactor(const std::string& op, int n) {
  if (op == "all_reduce") return 2.0 * (n - 1) / n;
  if (op == "all_gather" || op == "reduce_scatter" || op == "all_to_all") {
    return static_cast<double>(n - 1) / n;
  }
  return 1.0;
}

struct Row {
  std::string op;
  std::string impl;
  size_t bytes;
  double seconds;
  double algbw;
  double busbw;
};

// One operation of genesis's group on the first `bytes` of the buffers.
// The views one operation of `bytes` works on, made once per size (outside the timing,
// as a caller's tensors are), from the buffers `a` and `b`.
struct Operands {
  Storage x, y;      // The first `bytes` of a and b.
  Storage a_part;    // The first bytes / n of a (all_gather's input).
  Storage b_part;    // The first bytes / n of b (reduce_scatter's output).
};

absl::StatusOr<Operands> MakeOperands(ProcessGroup& group, const Storage& a, const Storage& b,
                                      size_t bytes) {
  const int64_t count = static_cast<int64_t>(bytes / 4);
  const int64_t part = count / group.size();
  Operands o;
  GENESIS_ASSIGN_OR_RETURN(o.x, a.Slice(0, 0, count));
  GENESIS_ASSIGN_OR_RETURN(o.y, b.Slice(0, 0, count));
  GENESIS_ASSIGN_OR_RETURN(o.a_part, a.Slice(0, 0, part));
  GENESIS_ASSIGN_OR_RETURN(o.b_part, b.Slice(0, 0, part));
  return o;
}

absl::StatusOr<Work> Issue(ProcessGroup& group, const std::string& op, const Operands& o) {
  const int n = group.size();
  if (op == "all_reduce") return group.AllReduce(o.x, ReduceOp::kSum);
  if (op == "broadcast") return group.Broadcast(o.x, 0);
  if (op == "reduce") return group.Reduce(o.x, 0, ReduceOp::kSum);
  if (op == "all_to_all") return group.AllToAll(o.x, o.y);
  if (op == "all_gather") return group.AllGather(o.a_part, o.y);
  if (op == "reduce_scatter") return group.ReduceScatter(o.x, o.b_part, ReduceOp::kSum);
  if (op == "send_recv") {
    const distributed::StoragePeerOp ops[] = {
        {distributed::PeerOp::Kind::kSend, o.x, (group.rank() + 1) % n, 0},
        {distributed::PeerOp::Kind::kRecv, o.y, (group.rank() + n - 1) % n, 0}};
    return group.SendRecv(ops);
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown operation ", op));
}

absl::StatusOr<double> TimeGenesis(ProcessGroup& group, const std::string& op, const Storage& a,
                                   const Storage& b, size_t bytes, int warmup, int iters) {
  GENESIS_ASSIGN_OR_RETURN(Operands o, MakeOperands(group, a, b, bytes));
  for (int i = 0; i < warmup; ++i) {
    GENESIS_ASSIGN_OR_RETURN(Work w, Issue(group, op, o));
    if (i + 1 == warmup) GENESIS_RETURN_IF_ERROR(w.Wait());
  }
  GENESIS_ASSIGN_OR_RETURN(Work barrier, group.Barrier());
  GENESIS_RETURN_IF_ERROR(barrier.Wait());
  if (group.device().is_cpu()) {
    // The host buffers are reused, so each operation must finish first; the median
    // operation, as RawGloo::Time gives it.
    std::vector<double> seconds;
    seconds.reserve(iters);
    for (int i = 0; i < iters; ++i) {
      const auto start = std::chrono::steady_clock::now();
      GENESIS_ASSIGN_OR_RETURN(Work w, Issue(group, op, o));
      GENESIS_RETURN_IF_ERROR(w.Wait());
      seconds.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    return Median(std::move(seconds));
  }
  const auto start = std::chrono::steady_clock::now();
  Work last;
  for (int i = 0; i < iters; ++i) {
    GENESIS_ASSIGN_OR_RETURN(last, Issue(group, op, o));
  }
  GENESIS_RETURN_IF_ERROR(last.Wait());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / iters;
}

// Seconds per all_reduce of `ops` all_reduces of `x` (a storage on its own stream),
// issued eagerly (`captured` false: each round waits for its last one) or captured into
// one CUDA graph replayed once per round; `rounds` rounds after one of warm-up.
absl::StatusOr<double> TimeRounds(ProcessGroup& group, const Storage& x, int ops, int rounds,
                                  bool captured) {
  CUstream_st* stream = x.stream();
  cuda::Graph graph;
  if (captured) {
    GENESIS_RETURN_IF_ERROR(cuda::BeginCapture(stream));
    for (int i = 0; i < ops; ++i) {
      absl::StatusOr<Work> w = group.AllReduce(x, ReduceOp::kSum);
      if (!w.ok()) {
        (void)cuda::Graph::EndCapture(stream);
        return w.status();
      }
    }
    GENESIS_ASSIGN_OR_RETURN(graph, cuda::Graph::EndCapture(stream));
  }
  auto round = [&]() -> absl::Status {
    if (captured) return graph.Launch(stream);
    Work last;
    for (int i = 0; i < ops; ++i) {
      GENESIS_ASSIGN_OR_RETURN(last, group.AllReduce(x, ReduceOp::kSum));
    }
    return last.Wait();
  };
  GENESIS_RETURN_IF_ERROR(round());
  GENESIS_RETURN_IF_ERROR(x.Synchronize());
  GENESIS_ASSIGN_OR_RETURN(Work barrier, group.Barrier());
  GENESIS_RETURN_IF_ERROR(barrier.Wait());
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < rounds; ++r) GENESIS_RETURN_IF_ERROR(round());
  GENESIS_RETURN_IF_ERROR(x.Synchronize());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
         (static_cast<double>(rounds) * ops);
}

// --graph_ops: eager against captured, genesis against NCCL called directly.
absl::Status GraphRows(ProcessGroup& group, RawNccl* raw) {
  const int ops = absl::GetFlag(FLAGS_graph_ops);
  const int rounds = absl::GetFlag(FLAGS_graph_replays);
  GENESIS_ASSIGN_OR_RETURN(uint64_t bytes, ParseByteSize(absl::GetFlag(FLAGS_graph_bytes)));
  GENESIS_ASSIGN_OR_RETURN(cuda::Stream stream, cuda::Stream::Create(group.device().index()));
  storage::StorageOptions options;
  options.stream = stream.native();
  GENESIS_ASSIGN_OR_RETURN(
      Storage x, storage::Ones({static_cast<int64_t>(bytes / 4)}, DType::kFloat32,
                               group.device(), options));
  GENESIS_ASSIGN_OR_RETURN(double eager, TimeRounds(group, x, ops, rounds, false));
  GENESIS_ASSIGN_OR_RETURN(double captured, TimeRounds(group, x, ops, rounds, true));
  double raw_eager = 0, raw_captured = 0;
  if (raw != nullptr) {
    GENESIS_ASSIGN_OR_RETURN(raw_eager, raw->Time("all_reduce", bytes, ops, ops * rounds));
    GENESIS_ASSIGN_OR_RETURN(raw_captured, raw->TimeGraph("all_reduce", bytes, ops, rounds));
  }
  if (group.rank() == 0) {
    std::printf("\n# CUDA graphs: %d all_reduces of %d B per round, %d rounds; us per all_reduce\n",
                ops, static_cast<int>(bytes), rounds);
    std::printf("%-10s %10s %10s\n", "issue", "genesis", "nccl");
    std::printf("%-10s %10.2f %10.2f\n", "eager", eager * 1e6, raw_eager * 1e6);
    std::printf("%-10s %10.2f %10.2f\n", "captured", captured * 1e6, raw_captured * 1e6);
  }
  return absl::OkStatus();
}

// NCCL's unique id for the baseline, made on rank 0 and broadcast over the group.
absl::StatusOr<std::vector<char>> SharedUniqueId(ProcessGroup& group) {
  std::vector<char> id(128, 0);
  if (group.rank() == 0) {
    // The world group's NCCL_COMM_ID would hand the baseline the same bootstrap address.
    unsetenv("NCCL_COMM_ID");
    GENESIS_ASSIGN_OR_RETURN(id, distributed::NewNcclUniqueId());
  }
  GENESIS_ASSIGN_OR_RETURN(Storage bytes,
                           storage::CreateStorage(id.data(), {128}, DType::kUInt8, group.device()));
  GENESIS_ASSIGN_OR_RETURN(Work w, group.Broadcast(bytes, 0));
  GENESIS_RETURN_IF_ERROR(w.Wait());
  GENESIS_ASSIGN_OR_RETURN(std::vector<uint8_t> out, bytes.ToVector<uint8_t>());
  return std::vector<char>(out.begin(), out.end());
}

void PrintHeader(ProcessGroup& group, const std::string& library, bool baseline,
                 const std::string& second_memory) {
  const int n = group.size();
  const std::string& backend = group.backend();
  std::string registration;
  if (absl::StatusOr<distributed::nccl_backend::RegistrationStats> stats =
          distributed::NcclBufferRegistration(group);
      stats.ok()) {
    registration = absl::StrCat("; buffer registration ", stats->enabled ? "on" : "off");
  }
  std::printf("# genesis %s group, %d ranks%s; time per operation (us), algbw and busbw "
              "(GB/s)%s\n",
              backend.c_str(), n, registration.c_str(),
              baseline ? absl::StrCat("; beside ", library, " called directly").c_str() : "");
  std::string columns;
  if (baseline) {
    columns = absl::StrFormat("   %4s time   algbw   busbw  genesis/%s busbw", library, library);
  }
  if (!second_memory.empty()) {
    absl::StrAppend(&columns, "   ", second_memory, " time  genesis/it busbw");
  }
  std::printf("%-15s %12s %10s %9s %9s%s\n", "op", "size(B)", "time(us)", "algbw", "busbw",
              columns.c_str());
}

Row MakeRow(const std::string& op, const std::string& impl, size_t bytes, double seconds, int n) {
  const double algbw = bytes / seconds / 1e9;
  return {op, impl, bytes, seconds, algbw, algbw * BusFactor(op, n)};
}

// Bucketed all_reduce of 1,000 gradients of 4 KiB to 4 MiB, 100 MiB in all: packed
// from separate storages, and as views of one flat buffer, against one flat all_reduce.
absl::Status Bucketed(ProcessGroup& group, RawNccl* raw, std::vector<Row>& rows) {
  constexpr int kGradients = 1000;
  constexpr size_t kTotal = size_t{100} << 20;
  std::mt19937 random(7);
  std::vector<double> weights(kGradients);
  double sum = 0;
  for (double& w : weights) sum += (w = std::exp(std::uniform_real_distribution<>(
                                        std::log(4096.0), std::log(4194304.0))(random)));
  std::vector<int64_t> counts(kGradients);
  int64_t total = 0;
  for (int i = 0; i < kGradients; ++i) {
    counts[i] = std::max<int64_t>(1, static_cast<int64_t>(weights[i] / sum * kTotal / 4));
    total += counts[i];
  }
  std::vector<Storage> separate;
  for (int64_t c : counts) {
    GENESIS_ASSIGN_OR_RETURN(Storage g, storage::Ones({c}, DType::kFloat32, group.device()));
    separate.push_back(g);
  }
  GENESIS_ASSIGN_OR_RETURN(Storage flat, storage::Ones({total}, DType::kFloat32, group.device()));
  std::vector<Storage> views;
  int64_t at = 0;
  for (int64_t c : counts) {
    GENESIS_ASSIGN_OR_RETURN(Storage v, flat.Slice(0, at, at + c));
    views.push_back(v);
    at += c;
  }
  const int iters = std::max(2, absl::GetFlag(FLAGS_iters) / 2);
  // Seconds per call, and the host's seconds per call to queue it (GPU groups).
  struct Timing {
    double seconds;
    double host;
  };
  auto time = [&](const std::function<absl::StatusOr<Work>()>& run) -> absl::StatusOr<Timing> {
    for (int i = 0; i < 2; ++i) {
      GENESIS_ASSIGN_OR_RETURN(Work w, run());
      GENESIS_RETURN_IF_ERROR(w.Wait());
    }
    GENESIS_ASSIGN_OR_RETURN(Work barrier, group.Barrier());
    GENESIS_RETURN_IF_ERROR(barrier.Wait());
    const auto start = std::chrono::steady_clock::now();
    Work last;
    for (int i = 0; i < iters; ++i) {
      GENESIS_ASSIGN_OR_RETURN(last, run());
      if (group.device().is_cpu()) GENESIS_RETURN_IF_ERROR(last.Wait());
    }
    const auto queued = std::chrono::steady_clock::now();
    GENESIS_RETURN_IF_ERROR(last.Wait());
    GENESIS_RETURN_IF_ERROR(flat.Synchronize());
    GENESIS_RETURN_IF_ERROR(separate.back().Synchronize());
    const auto end = std::chrono::steady_clock::now();
    return Timing{std::chrono::duration<double>(end - start).count() / iters,
                  std::chrono::duration<double>(queued - start).count() / iters};
  };
  GENESIS_ASSIGN_OR_RETURN(Timing one, time([&] { return group.AllReduce(flat, ReduceOp::kSum); }));
  GENESIS_ASSIGN_OR_RETURN(Timing packed, time([&] {
    return distributed::BucketedAllReduce(group, separate, ReduceOp::kSum);
  }));
  GENESIS_ASSIGN_OR_RETURN(Timing in_place, time([&] {
    return distributed::BucketedAllReduce(group, views, ReduceOp::kSum);
  }));
  // What splitting costs alone: four all_reduces of a quarter of the flat buffer each
  // (what the packed path's collectives are).
  std::vector<Storage> quarters;
  for (int64_t q = 0; q < 4; ++q) {
    GENESIS_ASSIGN_OR_RETURN(Storage part, flat.Slice(0, total * q / 4, total * (q + 1) / 4));
    quarters.push_back(part);
  }
  GENESIS_ASSIGN_OR_RETURN(Timing split, time([&]() -> absl::StatusOr<Work> {
    Work w;
    for (const Storage& part : quarters) {
      GENESIS_ASSIGN_OR_RETURN(w, group.AllReduce(part, ReduceOp::kSum));
    }
    return w;
  }));
  // What packing costs alone: every gradient copied into the flat buffer and back, with
  // the batch copier (two batches a call, as against the packed path's two a bucket).
  std::vector<transfer::CopyRequest> pack;
  std::vector<transfer::CopyRequest> unpack;
  for (size_t k = 0; k < separate.size(); ++k) {
    pack.push_back({separate[k].data_ptr(), separate[k].device(), false, views[k].data_ptr(),
                    views[k].device(), false, separate[k].nbytes()});
    unpack.push_back({views[k].data_ptr(), views[k].device(), false, separate[k].data_ptr(),
                      separate[k].device(), false, separate[k].nbytes()});
  }
  GENESIS_ASSIGN_OR_RETURN(transfer::BatchCopier * copier, transfer::BatchCopier::Default());
  GENESIS_ASSIGN_OR_RETURN(Timing copies, time([&]() -> absl::StatusOr<Work> {
    const Device at = group.device().is_cuda() ? group.device() : Device::Cpu();
    GENESIS_RETURN_IF_ERROR(copier->CopyAsync(pack, at, flat.stream()));
    GENESIS_RETURN_IF_ERROR(copier->CopyAsync(unpack, at, flat.stream()));
    return Work();
  }));
  const size_t bytes = static_cast<size_t>(total) * 4;
  const double factor = BusFactor("all_reduce", group.size());
  for (auto [name, seconds] : {std::pair<const char*, double>{"flat", one.seconds},
                               {"packed", packed.seconds}, {"views", in_place.seconds}}) {
    rows.push_back({"bucketed_all_reduce", name, bytes, seconds, bytes / seconds / 1e9,
                    bytes / seconds / 1e9 * factor});
  }
  if (group.rank() == 0) {
    std::printf("\n# bucketed all_reduce of %d gradients, %s in all (25 MiB buckets); "
                "host: the time to queue a call\n",
                kGradients, FormatByteSize(bytes).c_str());
    std::printf("one flat all_reduce        %10.1f us                 host %8.1f us\n",
                one.seconds * 1e6, one.host * 1e6);
    std::printf("bucketed, packed storages  %10.1f us  (%.3f of flat)  host %8.1f us\n",
                packed.seconds * 1e6, one.seconds / packed.seconds, packed.host * 1e6);
    std::printf("bucketed, views of a flat  %10.1f us  (%.3f of flat)  host %8.1f us\n",
                in_place.seconds * 1e6, one.seconds / in_place.seconds, in_place.host * 1e6);
    std::printf("four all_reduces of a quarter %7.1f us                 host %8.1f us\n",
                split.seconds * 1e6, split.host * 1e6);
    std::printf("packing and unpacking alone %9.1f us                 host %8.1f us\n",
                copies.seconds * 1e6, copies.host * 1e6);
  }
  if (raw != nullptr) {
    // NCCL called directly on the same gradients, each a cudaMalloc of its own, with no
    // copies: one flat buffer, then every gradient's all_reduce in NCCL groups of about
    // 25 MiB, in one group, and alone.
    std::vector<size_t> sizes;
    for (int64_t c : counts) sizes.push_back(static_cast<size_t>(c) * 4);
    const std::vector<size_t> whole = {bytes};
    GENESIS_ASSIGN_OR_RETURN(double raw_flat, raw->TimeGroupedAllReduce(whole, 0, 2, iters));
    struct Grouping {
      const char* name;
      size_t group_bytes;
    };
    for (const Grouping& g : {Grouping{"groups of 25 MiB", size_t{25} << 20},
                              Grouping{"groups of 4 MiB", size_t{4} << 20},
                              Grouping{"one group", ~size_t{0}}, Grouping{"no groups", 0}}) {
      GENESIS_ASSIGN_OR_RETURN(double seconds,
                               raw->TimeGroupedAllReduce(sizes, g.group_bytes, 2, iters));
      if (group.rank() == 0) {
        std::printf("raw NCCL, %-17s %9.1f us  (%.3f of raw flat %.1f us)\n", g.name,
                    seconds * 1e6, raw_flat / seconds, raw_flat * 1e6);
      }
    }
  }
  return absl::OkStatus();
}

// Google Benchmark's JSON layout, so that its tools and `genesis bench` read the rows.
absl::Status WriteJson(const std::vector<Row>& rows, int n, const std::string& backend,
                       std::string_view registration) {
  nlohmann::json out;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  out["context"] = {{"date", absl::FormatTime(absl::Now())},
                    {"host_name", host},
                    {"executable", "collectives_benchmark"},
                    {"num_cpus", static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN))},
                    {"library_build_type", "release"},
                    {"ranks", n},
                    {"backend", backend},
                    {"nccl_register", std::string(registration)}};
  nlohmann::json list = nlohmann::json::array();
  for (const Row& r : rows) {
    // Bucketed rows have one size, computed at run time: their names leave it out.
    const std::string name = r.op == "bucketed_all_reduce"
                                 ? absl::StrCat(r.op, "/", r.impl)
                                 : absl::StrCat(r.op, "/", r.impl, "/", r.bytes);
    list.push_back({{"name", name},
                    {"run_name", name},
                    {"run_type", "iteration"},
                    {"repetitions", 1},
                    {"repetition_index", 0},
                    {"threads", 1},
                    {"iterations", absl::GetFlag(FLAGS_iters)},
                    {"real_time", r.seconds * 1e6},
                    {"cpu_time", r.seconds * 1e6},
                    {"time_unit", "us"},
                    {"bytes_per_second", r.algbw * 1e9},
                    {"algbw_GBps", r.algbw},
                    {"busbw_GBps", r.busbw}});
  }
  out["benchmarks"] = list;
  std::ofstream file(absl::GetFlag(FLAGS_benchmark_out));
  file << out.dump(2) << "\n";
  if (!file) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot write ", absl::GetFlag(FLAGS_benchmark_out)));
  }
  return absl::OkStatus();
}

// The NCCL baseline's memory named by --baseline_memory or --second_baseline_memory
// (`flag`); "pool" only where `pool_allowed` (Memory::kExternal: the caller points the
// baseline at pool storages).
absl::StatusOr<RawNccl::Memory> BaselineMemory(const std::string& name, const char* flag,
                                               bool pool_allowed) {
  if (name == "cudamalloc") return RawNccl::Memory::kCudaMalloc;
  if (pool_allowed && name == "pool") return RawNccl::Memory::kExternal;
  if (name == "nccl_registered") return RawNccl::Memory::kNcclRegistered;
  if (name == "nccl_window") return RawNccl::Memory::kNcclWindow;
  return absl::InvalidArgumentError(absl::StrCat("--", flag, "=", name,
                                                 ": expected cudamalloc, nccl_registered, "
                                                 "nccl_window",
                                                 pool_allowed ? " or pool" : ""));
}

absl::Status RunRank() {
  const std::string backend_name = absl::GetFlag(FLAGS_backend);
  const distributed::Backend backend =
      backend_name == "gloo" ? distributed::Backend::kGloo : distributed::Backend::kNccl;
  distributed::GroupOptions options;
  GENESIS_ASSIGN_OR_RETURN(options.nccl_registration,
                           distributed::ParseNcclRegistration(absl::GetFlag(FLAGS_register)));
  const std::string baseline_memory = absl::GetFlag(FLAGS_baseline_memory);
  GENESIS_ASSIGN_OR_RETURN(const RawNccl::Memory memory,
                           BaselineMemory(baseline_memory, "baseline_memory", true));
  const std::string second_memory_name = absl::GetFlag(FLAGS_second_baseline_memory);
  std::optional<RawNccl::Memory> second_memory;
  if (!second_memory_name.empty()) {
    GENESIS_ASSIGN_OR_RETURN(second_memory,
                             BaselineMemory(second_memory_name, "second_baseline_memory", false));
  }
  const std::string baseline_comm = absl::GetFlag(FLAGS_baseline_comm);
  if (baseline_comm != "init_rank" && baseline_comm != "split") {
    return absl::InvalidArgumentError(
        absl::StrCat("--baseline_comm=", baseline_comm, ": expected init_rank or split"));
  }
  const auto creation_start = std::chrono::steady_clock::now();
  GENESIS_ASSIGN_OR_RETURN(std::unique_ptr<ProcessGroup> group,
                           distributed::ProcessGroupFromEnvironment(backend, options));
  const double creation_ms = std::chrono::duration<double, std::milli>(
                                 std::chrono::steady_clock::now() - creation_start)
                                 .count();
  const int n = group->size();
  const bool root = group->rank() == 0;
  // Rank 0's wall time from the environment to a ready group (the rendezvous, NCCL's
  // communicators and, with registration, the split for registered operations).
  if (root) std::printf("# group created in %.1f ms\n", creation_ms);
  if (root && backend == distributed::Backend::kNccl) {
    // Which operations run genesis's one-shot kernel (GENESIS_NCCL_ONE_SHOT_BYTES).
    GENESIS_ASSIGN_OR_RETURN(distributed::nccl_backend::OneShotStats one_shot,
                             distributed::NcclOneShot(*group));
    std::printf("# one-shot collectives %s\n", one_shot.ToString().c_str());
    // Which all_reduces move through the copy engines (GENESIS_NCCL_COPY_ENGINE_BYTES).
    GENESIS_ASSIGN_OR_RETURN(distributed::nccl_backend::CopyEngineStats copy_engine,
                             distributed::NcclCopyEngine(*group));
    std::printf("# copy engines' all_reduce %s\n", copy_engine.ToString().c_str());
  }
  GENESIS_ASSIGN_OR_RETURN(uint64_t min_bytes, ParseByteSize(absl::GetFlag(FLAGS_min_bytes)));
  GENESIS_ASSIGN_OR_RETURN(uint64_t max_bytes, ParseByteSize(absl::GetFlag(FLAGS_max_bytes)));
  const int warmup = absl::GetFlag(FLAGS_warmup);
  const int iters = absl::GetFlag(FLAGS_iters);
  // The library called directly, in the same processes: NCCL on cudaMalloc buffers, or
  // Gloo on host buffers.
  std::function<absl::StatusOr<double>(const std::string&, size_t)> raw;
  std::unique_ptr<RawNccl> raw_nccl;
  std::unique_ptr<RawNccl> second_nccl;  // --second_baseline_memory's.
  std::unique_ptr<RawGloo> raw_gloo;
  const std::string library = backend == distributed::Backend::kNccl ? "nccl" : "gloo";
  if (absl::GetFlag(FLAGS_baseline)) {
    if (backend == distributed::Backend::kNccl) {
      GENESIS_ASSIGN_OR_RETURN(std::vector<char> id, SharedUniqueId(*group));
      const bool registered = memory == RawNccl::Memory::kNcclRegistered;
      const bool window = memory == RawNccl::Memory::kNcclWindow;
      const RawNccl::Comm comm =
          baseline_comm == "split" ? RawNccl::Comm::kSplit : RawNccl::Comm::kInitRank;
      GENESIS_ASSIGN_OR_RETURN(raw_nccl, RawNccl::Create(group->rank(), n, group->device().index(),
                                                         id, max_bytes, memory, comm));
      if (second_memory.has_value()) {
        GENESIS_ASSIGN_OR_RETURN(std::vector<char> second_id, SharedUniqueId(*group));
        GENESIS_ASSIGN_OR_RETURN(
            second_nccl, RawNccl::Create(group->rank(), n, group->device().index(), second_id,
                                         max_bytes, *second_memory, comm));
        GENESIS_RETURN_IF_ERROR(second_nccl->RecordEvents(absl::GetFlag(FLAGS_baseline_events)));
        if (root) {
          std::printf("# the second nccl rows run on %s buffers\n", second_memory_name.c_str());
        }
      }
      if (root && baseline_comm == "split") {
        std::printf(
            "# the nccl rows run on a blocking communicator split from a "
            "non-blocking one\n");
      }
      if (root && registered) {
        std::printf("# the nccl rows run on ncclMemAlloc buffers registered with "
                    "ncclCommRegister\n");
      }
      if (root && window) {
        std::printf("# the nccl rows run in one symmetric window (ncclCommWindowRegister)\n");
      }
      GENESIS_RETURN_IF_ERROR(raw_nccl->RecordEvents(absl::GetFlag(FLAGS_baseline_events)));
      if (root && absl::GetFlag(FLAGS_baseline_events)) {
        std::printf("# the nccl rows record an event after each operation\n");
      }
      raw = [&](const std::string& op, size_t size) {
        return raw_nccl->Time(op, size, warmup, iters);
      };
    } else {
      const char* dir = std::getenv("GENESIS_STORE_DIR");
      GENESIS_ASSIGN_OR_RETURN(
          raw_gloo, RawGloo::Create(group->rank(), n,
                                    dir != nullptr ? dir : absl::StrCat("/tmp/genesis-raw-gloo-",
                                                                        std::getenv("MASTER_PORT")),
                                    max_bytes));
      raw = [&](const std::string& op, size_t size) {
        return raw_gloo->Time(op, size, warmup, iters);
      };
    }
  }
  const int64_t elements = static_cast<int64_t>(max_bytes / 4);
  // GPU buffers on a non-blocking stream of their own, as the baseline's (the legacy
  // default stream synchronises with every other stream, which costs each operation).
  std::optional<cuda::Stream> stream;
  storage::StorageOptions on_stream;
  if (group->device().is_cuda()) {
    GENESIS_ASSIGN_OR_RETURN(stream, cuda::Stream::Create(group->device().index()));
    on_stream.stream = stream->native();
  }
  GENESIS_ASSIGN_OR_RETURN(Storage a, storage::Ones({elements}, DType::kFloat32, group->device(),
                                                    on_stream));
  GENESIS_ASSIGN_OR_RETURN(Storage b, storage::Zeros({elements}, DType::kFloat32, group->device(),
                                                     on_stream));
  std::shared_ptr<distributed::SymmetricWindow> window;
  if (absl::GetFlag(FLAGS_symmetric)) {
    // Both buffers in one NCCL window, at the same offsets on every rank.
    GENESIS_ASSIGN_OR_RETURN(window, distributed::SymmetricWindow::Create(*group, 2 * max_bytes));
    GENESIS_ASSIGN_OR_RETURN(Storage wa, window->Allocate({elements}, DType::kFloat32,
                                                          on_stream.stream));
    GENESIS_ASSIGN_OR_RETURN(Storage wb, window->Allocate({elements}, DType::kFloat32,
                                                          on_stream.stream));
    GENESIS_RETURN_IF_ERROR(wa.CopyFrom(a));
    GENESIS_RETURN_IF_ERROR(wb.CopyFrom(b));
    a = wa;
    b = wb;
    if (root) std::printf("# genesis rows on symmetric memory (one NCCL window)\n");
  }
  // The baseline on pool memory: storages of their own, filled as genesis's.
  std::optional<Storage> pool_a, pool_b;
  if (raw_nccl != nullptr && baseline_memory == "pool") {
    GENESIS_ASSIGN_OR_RETURN(
        pool_a, storage::Ones({elements}, DType::kFloat32, group->device(), on_stream));
    GENESIS_ASSIGN_OR_RETURN(
        pool_b, storage::Zeros({elements}, DType::kFloat32, group->device(), on_stream));
    GENESIS_RETURN_IF_ERROR(stream->Synchronize());
    raw_nccl->UseBuffers(pool_a->data_ptr(), pool_b->data_ptr());
    if (root) std::printf("# the nccl rows run on storages of genesis's device pool\n");
  }
  // The second baseline's columns only where it runs (not with --baseline=false or Gloo).
  if (root) {
    PrintHeader(*group, library, static_cast<bool>(raw),
                second_nccl != nullptr ? second_memory_name : std::string());
  }
  std::vector<Row> rows;
  const std::vector<std::string> ops = absl::StrSplit(absl::GetFlag(FLAGS_ops), ',');
  for (const std::string& op : ops) {
    if (op == "send_recv" && n == 1) {
      if (root) std::printf("%-15s (needs 2 ranks)\n", op.c_str());
      continue;
    }
    bool warmed = false;  // The operation ran once untimed.
    for (uint64_t bytes = std::max<uint64_t>(min_bytes, 4); bytes <= max_bytes;
         bytes *= absl::GetFlag(FLAGS_step_factor)) {
      // Sizes are whole float32 elements, and whole chunks where the operation splits.
      const uint64_t unit = 4 * ((op == "all_gather" || op == "reduce_scatter" ||
                                  op == "all_to_all") ? n : 1);
      const uint64_t size = bytes / unit * unit;
      if (size == 0) continue;
      // Each repetition measures genesis and the baselines one after the other, so that
      // all see the same machine, genesis first in even repetitions and last in odd ones,
      // so that neither always meets what the one before left (the GPUs' clocks, a
      // lazily made connection); the table shows the medians. An operation's first size
      // has one repetition more, not counted, so that every path has run the operation
      // before it is timed: on four H200s, reduce of 1 MiB as the first size read 13.1 -
      // 16.6 us (genesis and NCCL alike, genesis, timed first, more), against 11.6 us for
      // both after the smaller sizes.
      std::vector<double> ours, theirs, second_times;
      const int repetitions = std::max(1, absl::GetFlag(FLAGS_benchmark_repetitions));
      for (int rep = warmed ? 0 : -1; rep < repetitions; ++rep) {
        const bool counted = rep >= 0;
        auto time_genesis = [&]() -> absl::Status {
          GENESIS_ASSIGN_OR_RETURN(double seconds,
                                   TimeGenesis(*group, op, a, b, size, warmup, iters));
          if (counted) {
            ours.push_back(seconds);
            rows.push_back(MakeRow(op, "genesis", size, seconds, n));
          }
          return absl::OkStatus();
        };
        auto time_baselines = [&]() -> absl::Status {
          if (raw) {
            absl::StatusOr<double> base = raw(op, size);
            if (base.ok()) {
              if (counted) {
                theirs.push_back(*base);
                rows.push_back(MakeRow(op, library, size, *base, n));
              }
            } else if (base.status().code() != absl::StatusCode::kUnimplemented) {
              return base.status();
            }
          }
          if (second_nccl != nullptr) {
            absl::StatusOr<double> second = second_nccl->Time(op, size, warmup, iters);
            if (second.ok()) {
              if (counted) second_times.push_back(*second);
            } else if (second.status().code() != absl::StatusCode::kUnimplemented) {
              return second.status();
            }
          }
          return absl::OkStatus();
        };
        if (rep % 2 == 0) {
          GENESIS_RETURN_IF_ERROR(time_genesis());
          GENESIS_RETURN_IF_ERROR(time_baselines());
        } else {
          GENESIS_RETURN_IF_ERROR(time_baselines());
          GENESIS_RETURN_IF_ERROR(time_genesis());
        }
      }
      warmed = true;
      const Row mine = MakeRow(op, "genesis", size, Median(ours), n);
      std::string line = absl::StrFormat("%-15s %12d %10.2f %9.2f %9.2f", op, size,
                                         mine.seconds * 1e6, mine.algbw, mine.busbw);
      if (!theirs.empty()) {
        const Row base = MakeRow(op, library, size, Median(theirs), n);
        absl::StrAppendFormat(&line, "   %9.2f %7.2f %7.2f  %12.3f", base.seconds * 1e6,
                              base.algbw, base.busbw, base.seconds / mine.seconds);
      }
      if (!second_times.empty()) {
        const double second = Median(second_times);
        absl::StrAppendFormat(&line, "   %9.2f %12.3f", second * 1e6, second / mine.seconds);
      }
      if (root) std::printf("%s\n", line.c_str());
    }
  }
  if (absl::GetFlag(FLAGS_bucketed)) {
    GENESIS_RETURN_IF_ERROR(Bucketed(*group, raw_nccl.get(), rows));
  }
  if (absl::GetFlag(FLAGS_graph_ops) > 0 && backend == distributed::Backend::kNccl) {
    GENESIS_RETURN_IF_ERROR(GraphRows(*group, raw_nccl.get()));
  }
  if (root && backend == distributed::Backend::kNccl) {
    absl::StatusOr<distributed::nccl_backend::RegistrationStats> registration =
        distributed::NcclBufferRegistration(*group);
    if (registration.ok()) {
      std::printf("\n# buffer registration (rank 0): %s\n", registration->ToString().c_str());
    }
  }
  if (root && !absl::GetFlag(FLAGS_benchmark_out).empty()) {
    const std::string_view registration =
        distributed::NcclRegistrationName(group->info().nccl_registration);
    GENESIS_RETURN_IF_ERROR(WriteJson(rows, n, backend_name, registration));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace genesis::benchmarks

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return genesis::benchmarks::RankMain(absl::GetFlag(FLAGS_nproc), absl::GetFlag(FLAGS_backend) == "gloo",
                                       &genesis::benchmarks::RunRank);
}
