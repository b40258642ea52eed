// What an all_reduce whose bytes move through the GPUs' copy engines would give,
// against NCCL's all_reduce: two GPUs of one process (NVLink between them), float32.
//
//   copy_engine_benchmark [--bytes=100MiB] [--chunk=16MiB] [--add_blocks=0 (every SM)]
//                         [--busy_us=1000] [--reps=10]
//
// Three tables, median microseconds of --reps runs after two not counted:
// - links: --bytes from GPU 0's memory to GPU 1's (one way) or each to the other (both
//   ways), stored or loaded by the SMs (a kernel of two blocks per SM) or moved by the
//   copy engines (cudaMemcpyPeerAsync);
// - all_reduce of --bytes, its result checked: NCCL's (ncclAllReduce on cudaMalloc
//   buffers); "copy engines": genesis's CopyEngineAllReduce (nccl/copy_engine_all_reduce.h)
//   in pieces of --chunk, each GPU a rank with a cudaMalloc window the other reaches by
//   peer access; "NCCL zero-CTA": NCCL 2.28's all_to_all, an addition (a kernel of
//   --add_blocks blocks) and its all_gather on symmetric windows of a communicator whose
//   CTA policy is NCCL_CTA_POLICY_ZERO (NCCL moves those through the copy engines);
// - the same all_reduces beside a kernel that keeps every SM busy for --busy_us (one
//   block per SM, as reducer_benchmark's layers do), queued at the same time on another
//   stream: how long that kernel took, and the whole.
//
// Without two GPUs it says so and exits 0. A study for the collectives' design: groups of
// processes run the same all_reduce over NCCL's symmetric windows
// (GENESIS_NCCL_COPY_ENGINE_BYTES).
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "benchmarks/distributed/copy_engine_kernels.h"
#include "benchmarks/distributed/synthetic_backward.h"
#include "genesis/core/byte_size.h"
#include "genesis/core/dtype.h"
#include "genesis/core/status.h"
#include "genesis/cuda/internal/check.h"
#include "genesis/distributed/nccl/copy_engine_all_reduce.h"
#include "genesis/distributed/nccl/copy_engine_plan.h"
#include "genesis/distributed/reduce_op.h"

ABSL_FLAG(std::string, bytes, "100MiB", "bytes of float32 each GPU all_reduces");
ABSL_FLAG(std::string, chunk, "16MiB",
          "the copy-engine all_reduce's pieces (a multiple of 512 bytes)");
ABSL_FLAG(int, add_blocks, 0, "blocks of the zero-CTA path's addition (0: one per SM)");
ABSL_FLAG(int, busy_us, 1000, "how long the kernel beside the all_reduces keeps every SM busy");
ABSL_FLAG(int, reps, 10, "runs of each row, after two not counted");

namespace genesis::benchmarks {
namespace {

constexpr int kGpus = 2;

// The project's CUDA status ("<call>: <error>").
absl::Status Cuda(cudaError_t e, const char* what) { return cuda::CudaStatus(e, what); }
absl::Status Nccl(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", ncclGetErrorString(r)));
}

// One GPU's side: its streams, buffers and communicators.
struct Gpu {
  int device = 0;
  int sms = 0;
  cudaStream_t stream = nullptr;  // NCCL's operations, the additions.
  cudaStream_t copies = nullptr;  // The links' copy-engine rows.
  cudaStream_t busy = nullptr;    // The kernel beside.
  cudaEvent_t busy_start = nullptr, busy_end = nullptr;
  float* data = nullptr;      // What this GPU all_reduces (refilled before each run).
  float* peer = nullptr;      // What the links' rows write into.
  float* init = nullptr;      // The values data starts from.
  char* ce_window = nullptr;  // The copy engines' all_reduce's window (the layout's bytes).
  std::unique_ptr<distributed::nccl_backend::CopyEngineAllReduce> ce;
  ncclComm_t comm = nullptr;         // Default CTA policy.
  ncclComm_t zero_cta = nullptr;     // NCCL_CTA_POLICY_ZERO.
  float* win_in = nullptr;           // Symmetric windows of zero_cta: the input,
  float* win_parts = nullptr;        // every rank's part of this rank's shard,
  float* win_shard = nullptr;        // the reduced shard,
  float* win_out = nullptr;          // and the all_gathered result.
  std::array<ncclWindow_t, 4> windows{};
};

class Bench {
 public:
  absl::Status SetUp(size_t bytes, size_t chunk, int add_blocks) {
    bytes_ = bytes;
    count_ = bytes / sizeof(float);
    GENESIS_ASSIGN_OR_RETURN(distributed::nccl_backend::CopyEngineLayout layout,
                             distributed::nccl_backend::CopyEngineLayout::Create(kGpus, chunk));
    layout_ = std::make_unique<distributed::nccl_backend::CopyEngineLayout>(layout);
    ncclUniqueId ids[2];
    GENESIS_RETURN_IF_ERROR(Nccl(ncclGetUniqueId(&ids[0]), "ncclGetUniqueId"));
    GENESIS_RETURN_IF_ERROR(Nccl(ncclGetUniqueId(&ids[1]), "ncclGetUniqueId"));
    for (int d = 0; d < kGpus; ++d) {
      Gpu& g = gpus_[d];
      g.device = d;
      GENESIS_RETURN_IF_ERROR(Cuda(cudaSetDevice(d), "cudaSetDevice"));
      GENESIS_RETURN_IF_ERROR(Cuda(cudaDeviceEnablePeerAccess(1 - d, 0), "peer access"));
      GENESIS_RETURN_IF_ERROR(
          Cuda(cudaDeviceGetAttribute(&g.sms, cudaDevAttrMultiProcessorCount, d), "SMs"));
      for (cudaStream_t* s : {&g.stream, &g.copies, &g.busy}) {
        GENESIS_RETURN_IF_ERROR(
            Cuda(cudaStreamCreateWithFlags(s, cudaStreamNonBlocking), "cudaStreamCreate"));
      }
      GENESIS_RETURN_IF_ERROR(Cuda(cudaEventCreate(&g.busy_start), "cudaEventCreate"));
      GENESIS_RETURN_IF_ERROR(Cuda(cudaEventCreate(&g.busy_end), "cudaEventCreate"));
      GENESIS_RETURN_IF_ERROR(
          Cuda(cudaMalloc(reinterpret_cast<void**>(&g.ce_window), layout.bytes()), "cudaMalloc"));
      for (float** p : {&g.data, &g.peer, &g.init}) {
        GENESIS_RETURN_IF_ERROR(Cuda(cudaMalloc(p, bytes), "cudaMalloc"));
      }
      // Rank d holds d + 1 + (i % 7): the sum is 3 + 2 (i % 7).
      std::vector<float> values(count_);
      for (size_t i = 0; i < count_; ++i) values[i] = static_cast<float>(d + 1 + i % 7);
      GENESIS_RETURN_IF_ERROR(
          Cuda(cudaMemcpy(g.init, values.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy"));
    }
    add_blocks_ = add_blocks > 0 ? add_blocks : gpus_[0].sms;
    // Each GPU's all_reduce reaches the other's window through peer access.
    distributed::nccl_backend::CopyEngineWindows windows;
    windows.layout = layout_.get();
    for (int d = 0; d < kGpus; ++d) windows.windows[d] = gpus_[d].ce_window;
    GENESIS_RETURN_IF_ERROR(ForEachGpu([&](Gpu& g) -> absl::Status {
      windows.rank = g.device;
      GENESIS_ASSIGN_OR_RETURN(g.ce,
                               distributed::nccl_backend::CopyEngineAllReduce::Create(windows));
      return absl::OkStatus();
    }));
    ncclConfig_t zero = NCCL_CONFIG_INITIALIZER;
    zero.CTAPolicy = NCCL_CTA_POLICY_ZERO;
    for (int which = 0; which < 2; ++which) {
      GENESIS_RETURN_IF_ERROR(Nccl(ncclGroupStart(), "ncclGroupStart"));
      for (int d = 0; d < kGpus; ++d) {
        GENESIS_RETURN_IF_ERROR(Cuda(cudaSetDevice(d), "cudaSetDevice"));
        if (which == 0) {
          GENESIS_RETURN_IF_ERROR(
              Nccl(ncclCommInitRank(&gpus_[d].comm, kGpus, ids[0], d), "ncclCommInitRank"));
        } else {
          GENESIS_RETURN_IF_ERROR(
              Nccl(ncclCommInitRankConfig(&gpus_[d].zero_cta, kGpus, ids[1], d, &zero),
                   "ncclCommInitRankConfig (NCCL_CTA_POLICY_ZERO)"));
        }
      }
      GENESIS_RETURN_IF_ERROR(Nccl(ncclGroupEnd(), "ncclGroupEnd"));
    }
    const size_t sizes[4] = {bytes, bytes, bytes / kGpus, bytes};
    for (int w = 0; w < 4; ++w) {
      for (int d = 0; d < kGpus; ++d) {
        Gpu& g = gpus_[d];
        float** p[4] = {&g.win_in, &g.win_parts, &g.win_shard, &g.win_out};
        GENESIS_RETURN_IF_ERROR(Cuda(cudaSetDevice(d), "cudaSetDevice"));
        GENESIS_RETURN_IF_ERROR(
            Nccl(ncclMemAlloc(reinterpret_cast<void**>(p[w]), sizes[w]), "ncclMemAlloc"));
      }
      GENESIS_RETURN_IF_ERROR(Nccl(ncclGroupStart(), "ncclGroupStart"));
      for (int d = 0; d < kGpus; ++d) {
        Gpu& g = gpus_[d];
        float* p[4] = {g.win_in, g.win_parts, g.win_shard, g.win_out};
        GENESIS_RETURN_IF_ERROR(Cuda(cudaSetDevice(d), "cudaSetDevice"));
        GENESIS_RETURN_IF_ERROR(Nccl(ncclCommWindowRegister(g.zero_cta, p[w], sizes[w],
                                                            &g.windows[w], NCCL_WIN_COLL_SYMMETRIC),
                                     "ncclCommWindowRegister"));
      }
      GENESIS_RETURN_IF_ERROR(Nccl(ncclGroupEnd(), "ncclGroupEnd"));
    }
    return absl::OkStatus();
  }

  // Calls `f` for each GPU, that GPU current; the first error.
  absl::Status ForEachGpu(const std::function<absl::Status(Gpu&)>& f) {
    for (Gpu& g : gpus_) {
      GENESIS_RETURN_IF_ERROR(Cuda(cudaSetDevice(g.device), "cudaSetDevice"));
      GENESIS_RETURN_IF_ERROR(f(g));
    }
    return absl::OkStatus();
  }

  // ForEachGpu within one NCCL group.
  absl::Status NcclGroup(const std::function<absl::Status(Gpu&)>& f) {
    GENESIS_RETURN_IF_ERROR(Nccl(ncclGroupStart(), "ncclGroupStart"));
    const absl::Status issued = ForEachGpu(f);
    const absl::Status ended = Nccl(ncclGroupEnd(), "ncclGroupEnd");
    return issued.ok() ? ended : issued;
  }

  // Both GPUs idle, then `issue` queued and waited for: the median wall time in us,
  // and (with `busy`) the median time of the kernel queued beside.
  struct Timing {
    double us = 0;
    double busy_us = 0;
  };
  absl::StatusOr<Timing> Time(int reps, const std::function<absl::Status()>& issue, int busy_us = 0,
                              bool refill = false) {
    std::vector<double> walls, busies;
    for (int r = 0; r < reps + 2; ++r) {
      GENESIS_RETURN_IF_ERROR(ForEachGpu([&](Gpu& g) -> absl::Status {
        if (refill) {
          GENESIS_RETURN_IF_ERROR(
              Cuda(cudaMemcpyAsync(g.data, g.init, bytes_, cudaMemcpyDeviceToDevice, g.stream),
                   "the refill"));
        }
        return Cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      }));
      const auto start = std::chrono::steady_clock::now();
      if (busy_us > 0) {
        GENESIS_RETURN_IF_ERROR(ForEachGpu([&](Gpu& g) -> absl::Status {
          GENESIS_RETURN_IF_ERROR(Cuda(cudaEventRecord(g.busy_start, g.busy), "cudaEventRecord"));
          GENESIS_RETURN_IF_ERROR(
              Cuda(LaunchLayer(g.sms, int64_t{busy_us} * 1000, g.busy), "the busy kernel"));
          return Cuda(cudaEventRecord(g.busy_end, g.busy), "cudaEventRecord");
        }));
      }
      GENESIS_RETURN_IF_ERROR(issue());
      float busy_ms = 0;
      GENESIS_RETURN_IF_ERROR(ForEachGpu([&](Gpu& g) -> absl::Status {
        GENESIS_RETURN_IF_ERROR(Cuda(cudaDeviceSynchronize(), "the run"));
        if (busy_us > 0) {
          float ms = 0;
          GENESIS_RETURN_IF_ERROR(
              Cuda(cudaEventElapsedTime(&ms, g.busy_start, g.busy_end), "cudaEventElapsedTime"));
          busy_ms = std::max(busy_ms, ms);
        }
        return absl::OkStatus();
      }));
      const double wall =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
              .count();
      if (r < 2) continue;
      walls.push_back(wall);
      busies.push_back(busy_ms * 1e3);
    }
    return Timing{Median(walls), Median(busies)};
  }

  // One way (GPU 0 to 1) or both ways: SM stores, SM loads, or the copy engines.
  absl::Status Link(bool both_ways, int how) {
    for (int d = 0; d < (both_ways ? kGpus : 1); ++d) {
      Gpu& g = gpus_[d];
      Gpu& other = gpus_[1 - d];
      GENESIS_RETURN_IF_ERROR(Cuda(cudaSetDevice(d), "cudaSetDevice"));
      if (how == 0) {
        GENESIS_RETURN_IF_ERROR(
            Cuda(LaunchSmCopy(g.init, other.peer, bytes_, 2 * g.sms, g.stream), "SM stores"));
      } else if (how == 1) {
        GENESIS_RETURN_IF_ERROR(
            Cuda(LaunchSmCopy(other.init, g.peer, bytes_, 2 * g.sms, g.stream), "SM loads"));
      } else {
        GENESIS_RETURN_IF_ERROR(Cuda(
            cudaMemcpyPeerAsync(other.peer, 1 - d, g.init, d, bytes_, g.copies), "copy engines"));
      }
    }
    return absl::OkStatus();
  }

  absl::Status NcclAllReduce() {
    return NcclGroup([&](Gpu& g) {
      return Nccl(ncclAllReduce(g.data, g.data, count_, ncclFloat, ncclSum, g.comm, g.stream),
                  "ncclAllReduce");
    });
  }

  // The library's copy engines' all_reduce (nccl/copy_engine_all_reduce.h), each GPU a
  // rank of its own.
  absl::Status CopyEngineAllReduce() {
    return ForEachGpu([&](Gpu& g) {
      return g.ce->AllReduce(g.data, bytes_, DType::kFloat32, distributed::ReduceOp::kSum,
                             g.stream);
    });
  }

  // NCCL zero-CTA: all_to_all of the input (rank r gets every rank's shard r), the
  // shard's parts added, all_gather of the shards; then the result into `data`.
  absl::Status ZeroCtaAllReduce() {
    const size_t shard = count_ / kGpus;
    GENESIS_RETURN_IF_ERROR(ForEachGpu([&](Gpu& g) {
      return Cuda(cudaMemcpyAsync(g.win_in, g.data, bytes_, cudaMemcpyDeviceToDevice, g.stream),
                  "the input into the window");
    }));
    GENESIS_RETURN_IF_ERROR(NcclGroup([&](Gpu& g) {
      return Nccl(ncclAlltoAll(g.win_in, g.win_parts, shard, ncclFloat, g.zero_cta, g.stream),
                  "ncclAlltoAll");
    }));
    GENESIS_RETURN_IF_ERROR(ForEachGpu([&](Gpu& g) {
      return Cuda(LaunchAddShards(g.win_parts, g.win_shard, shard, kGpus, add_blocks_, g.stream),
                  "the addition");
    }));
    GENESIS_RETURN_IF_ERROR(NcclGroup([&](Gpu& g) {
      return Nccl(ncclAllGather(g.win_shard, g.win_out, shard, ncclFloat, g.zero_cta, g.stream),
                  "ncclAllGather");
    }));
    return ForEachGpu([&](Gpu& g) {
      return Cuda(cudaMemcpyAsync(g.data, g.win_out, bytes_, cudaMemcpyDeviceToDevice, g.stream),
                  "the result out of the window");
    });
  }

  // Whether both GPUs' `data` holds the sum, 3 + 2 (i % 7).
  absl::StatusOr<bool> Summed() {
    std::vector<float> values(count_);
    bool right = true;
    GENESIS_RETURN_IF_ERROR(ForEachGpu([&](Gpu& g) -> absl::Status {
      GENESIS_RETURN_IF_ERROR(
          Cuda(cudaMemcpy(values.data(), g.data, bytes_, cudaMemcpyDeviceToHost), "cudaMemcpy"));
      for (size_t i = 0; i < count_; ++i) {
        right = right && values[i] == static_cast<float>(3 + 2 * (i % 7));
      }
      return absl::OkStatus();
    }));
    return right;
  }

 private:
  static double Median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
  }

  std::array<Gpu, kGpus> gpus_;
  std::unique_ptr<distributed::nccl_backend::CopyEngineLayout> layout_;  // The all_reduces'.
  size_t bytes_ = 0;
  size_t count_ = 0;
  int add_blocks_ = 0;
};

absl::Status Run() {
  GENESIS_ASSIGN_OR_RETURN(uint64_t bytes, ParseByteSize(absl::GetFlag(FLAGS_bytes)));
  GENESIS_ASSIGN_OR_RETURN(uint64_t chunk, ParseByteSize(absl::GetFlag(FLAGS_chunk)));
  if (bytes == 0 || bytes % (16 * kGpus) != 0 || chunk == 0 || chunk % 16 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("--bytes must be a positive multiple of ",
                                                   16 * kGpus,
                                                   " and --chunk a positive multiple of 16"));
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < kGpus) {
    std::printf("# copy_engine_benchmark needs two GPUs; found %d: nothing measured\n", devices);
    return absl::OkStatus();
  }
  Bench bench;
  GENESIS_RETURN_IF_ERROR(bench.SetUp(bytes, chunk, absl::GetFlag(FLAGS_add_blocks)));
  const int reps = std::max(1, absl::GetFlag(FLAGS_reps));
  int nccl_version = 0;
  ncclGetVersion(&nccl_version);
  std::printf(
      "# copy engines against NCCL %d: two GPUs of one process, %.1f MiB of float32, "
      "pieces of %.1f MiB; median us of %d runs\n",
      nccl_version, bytes / 1048576.0, chunk / 1048576.0, reps);
  std::printf("%-36s %10s %10s\n", "link", "us", "GB/s");
  const char* hows[3] = {"SM stores", "SM loads", "copy engines"};
  for (int how : {0, 1, 2}) {
    for (bool both : {false, true}) {
      GENESIS_ASSIGN_OR_RETURN(Bench::Timing t,
                               bench.Time(reps, [&] { return bench.Link(both, how); }));
      std::printf("%-36s %10.1f %10.1f\n",
                  absl::StrCat(hows[how], both ? ", both ways" : ", one way").c_str(), t.us,
                  bytes / t.us / 1e3);
    }
  }
  struct Path {
    const char* name;
    std::function<absl::Status()> issue;
  };
  const std::vector<Path> paths = {
      {"NCCL all_reduce", [&] { return bench.NcclAllReduce(); }},
      {"copy engines (CopyEngineAllReduce)", [&] { return bench.CopyEngineAllReduce(); }},
      {"NCCL zero-CTA all_to_all, add, all_gather", [&] { return bench.ZeroCtaAllReduce(); }},
  };
  const int busy_us = absl::GetFlag(FLAGS_busy_us);
  GENESIS_ASSIGN_OR_RETURN(Bench::Timing alone,
                           bench.Time(
                               reps, [] { return absl::OkStatus(); }, busy_us));
  std::printf("\n%-44s %10s %8s %14s %14s %8s\n", "all_reduce", "us", "of NCCL", "beside: whole",
              "busy kernel", "result");
  double nccl_us = 0;
  for (const Path& p : paths) {
    GENESIS_ASSIGN_OR_RETURN(Bench::Timing t, bench.Time(reps, p.issue, 0, /*refill=*/true));
    GENESIS_ASSIGN_OR_RETURN(const bool summed, bench.Summed());
    GENESIS_ASSIGN_OR_RETURN(Bench::Timing beside,
                             bench.Time(reps, p.issue, busy_us, /*refill=*/true));
    GENESIS_ASSIGN_OR_RETURN(const bool summed_beside, bench.Summed());
    if (nccl_us == 0) nccl_us = t.us;
    std::printf("%-44s %10.1f %8.3f %14.1f %14.1f %8s\n", p.name, t.us, t.us / nccl_us, beside.us,
                beside.busy_us, summed && summed_beside ? "right" : "WRONG");
  }
  std::printf("%-44s %10s %8s %14.1f %14.1f\n", "(the busy kernel alone)", "", "", alone.us,
              alone.busy_us);
  return absl::OkStatus();
}

}  // namespace
}  // namespace genesis::benchmarks

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const absl::Status status = genesis::benchmarks::Run();
  if (!status.ok()) {
    std::fprintf(stderr, "copy_engine_benchmark: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
