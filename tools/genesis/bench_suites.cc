#include "tools/genesis/bench_suites.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace genesis::cli {
namespace {

constexpr int64_t kPoolSizes[] = {512, 64 << 10, 1 << 20, 32 << 20};
constexpr int64_t kHostPoolSizes[] = {8, 512, 64 << 10, 1 << 20, 32 << 20, 64 << 20};
// The other general allocators of allocator_benchmark: benchmark, label.
constexpr const char* kForeignAllocators[][2] = {
    {"BM_Mimalloc", "mimalloc"}, {"BM_Jemalloc", "jemalloc"}, {"BM_Tcmalloc", "tcmalloc"}};
// Sizes of the copy sweeps that also get a row in the tables (the plots show them all).
constexpr int64_t kCopyTableSizes[] = {64 << 10, 4 << 20, 256 << 20};
constexpr int kMaxPeerGpus = 8;
// Traces under traces/ that the replay suite has rows for.
constexpr const char* kTraces[] = {"gpt2_small_train", "resnet50_train"};

std::string SizeName(int64_t bytes) {
  if (bytes >= (1 << 20)) return absl::StrCat(bytes >> 20, " MiB");
  if (bytes >= (1 << 10)) return absl::StrCat(bytes >> 10, " KiB");
  return absl::StrCat(bytes, " B");
}

std::string Threads(int n) { return n == 1 ? "1 thread" : absl::StrCat(n, " threads"); }

std::vector<BenchSuite> MakeSuites() {
  return {
      {"alloc",
       "memory pools against glibc's malloc, mimalloc, jemalloc, tcmalloc and CUDA's "
       "allocators, 1 to 16 threads"},
      {"copy", "copies by path and size against memcpy / cudaMemcpy(Async)"},
      {"batch", "batches of copies against a loop of cudaMemcpyAsync and cudaMemcpyBatchAsync"},
      {"peer", "every ordered pair of GPUs: bandwidth and latency, against cudaMemcpyPeerAsync"},
      {"convert", "dtype conversion against a copy of the same bytes"},
      {"contiguous", "contiguous() of a transposed matrix against a copy of the same bytes"},
      {"replay", "recorded allocation traces (traces/) through a pool against malloc/free"},
      {"collectives",
       "process groups' collectives against the same library called directly (Gloo between "
       "CPU processes, NCCL across the chosen GPUs, one rank each; from 1 MiB bus bandwidth, "
       "as nccl-tests gives it), and bucketed all_reduce"},
  };
}

std::vector<BenchRun> MakeRuns() {
  using D = BenchDevice;
  return {
      {"alloc", D::kCpu, "alloc_cpu", "benchmarks/memory", "allocator_benchmark", "", ""},
      {"alloc", D::kCuda, "alloc_cuda", "benchmarks/memory", "allocator_cuda_benchmark", "",
       ""},
      // PyTorch's counterparts of the CPU rows, where the python3 that runs the script
      // has PyTorch (reported as unavailable otherwise).
      {"alloc", D::kCpu, "torch_alloc", "benchmarks/torch", "torch_cpu.py", "BM_TorchEmpty",
       ""},
      {"copy", D::kCpu, "copy_cpu", "benchmarks/transfer", "copy_benchmark", "", ""},
      {"copy", D::kCuda, "copy_cuda", "benchmarks/transfer", "copy_cuda_benchmark", "", ""},
      {"copy", D::kCuda, "copy_cuda_single", "benchmarks/transfer",
       "batch_copy_cuda_benchmark", "Pinned256MiB|Pageable256MiB", ""},
      {"copy", D::kCuda, "copy_cuda_staging", "benchmarks/transfer", "transfer_cuda_benchmark",
       "", "CudaMemcpy|threads:8/chunk_kib:4096/buffers:4/"},
      {"batch", D::kCuda, "batch_cuda", "benchmarks/transfer", "batch_copy_cuda_benchmark",
       "BM_D2D_|Pinned1024x", ""},
      {"peer", D::kCuda, "peer_matrix_cuda", "benchmarks/transfer",
       "peer_matrix_cuda_benchmark", "", "", false, 2},
      {"peer", D::kCuda, "peer_batch_cuda", "benchmarks/transfer", "batch_copy_cuda_benchmark",
       "BM_Peer_", "", false, 2},
      {"convert", D::kCpu, "convert_cpu_half", "benchmarks", "half_conversion_benchmark", "",
       ""},
      {"convert", D::kCpu, "convert_cpu", "benchmarks/storage", "storage_benchmark",
       "BM_Convert|BM_Memcpy/50331648/", ""},
      {"convert", D::kCpu, "torch_convert", "benchmarks/torch", "torch_cpu.py", "BM_TorchTo",
       ""},
      {"convert", D::kCuda, "convert_cuda", "benchmarks/storage", "storage_cuda_benchmark",
       "BM_ConvertCuda|BM_CudaMemcpyAsync/50331648/", ""},
      {"contiguous", D::kCpu, "contiguous_cpu", "benchmarks/storage", "storage_benchmark",
       "BM_CopyTransposed|BM_Memcpy/67108864/", ""},
      {"contiguous", D::kCpu, "torch_contiguous", "benchmarks/torch", "torch_cpu.py",
       "BM_TorchContiguous", ""},
      {"contiguous", D::kCuda, "contiguous_cuda", "benchmarks/storage",
       "storage_cuda_benchmark", "BM_CopyStridedCuda|BM_CudaMemcpyAsync/67108864/", ""},
      {"replay", D::kCpu, "replay_cpu", "benchmarks/replay", "replay_benchmark", "", "", true},
      {"collectives", D::kCpu, "collectives_cpu", "benchmarks/distributed",
       "collectives_benchmark", "", "", false, 1, false,
       {"--backend=gloo", "--nproc=2", "--ops=all_reduce,broadcast", "--max_bytes=64MiB",
        "--iters=10", "--warmup=2"},
       {"--backend=gloo", "--nproc=2", "--ops=all_reduce", "--max_bytes=1MiB", "--iters=5",
        "--warmup=2", "--bucketed=false"}},
      {"collectives", D::kCuda, "collectives_cuda", "benchmarks/distributed",
       "collectives_benchmark", "", "", false, 1, true,
       {"--backend=nccl"},
       {"--backend=nccl", "--max_bytes=64MiB", "--iters=10"}},
  };
}

}  // namespace

std::string LimitFor(const BenchPair& pair, int cpus, int gpus) {
  for (const BenchLimit& l : pair.limits) {
    if (l.max_cpus > 0 && cpus > l.max_cpus) continue;
    if (l.min_gpus > 0 && gpus < l.min_gpus) continue;
    if (l.max_gpus > 0 && gpus > l.max_gpus) continue;
    return l.text;
  }
  return "";
}

double TargetFor(const BenchPair& pair, int cpus) {
  if (pair.scaling_threads <= 0 || pair.target <= 0) return pair.target;
  return pair.target * std::min(pair.scaling_threads, std::max(cpus, 1));
}

namespace {

BenchPair Pair(std::string run_id, std::string label, std::string figure,
               std::string baseline_label, std::string baseline,
               BenchMetric metric = BenchMetric::kTime, double target = 0) {
  BenchPair p;
  p.run_id = std::move(run_id);
  p.label = std::move(label);
  p.figure = std::move(figure);
  p.baseline_label = std::move(baseline_label);
  p.baseline = std::move(baseline);
  p.metric = metric;
  p.target = target;
  if (target > 0) p.target_source = "README";
  return p;
}

// `pair` with its baseline from PyTorch's script (run `torch_run`).
BenchPair FromTorch(BenchPair pair, std::string torch_run) {
  pair.baseline_run = std::move(torch_run);
  return pair;
}

// The thread settings of PyTorch's rows: its own threads, and one (as genesis's loops).
constexpr const char* kTorchThreads[][2] = {{"default", "PyTorch's threads"},
                                            {"1", "1 thread"}};

// Thread scaling: at least this fraction of one thread's throughput per thread that has
// a core of its own.
constexpr double kScalingPerCore = 0.8;

BenchPair Scaling(BenchPair p, int threads) {
  p.scaling_threads = threads;
  return p;
}

// What holds rows below their targets where they miss (BenchPair::limits), as measured.
constexpr char kTransposeLimit[] =
    "one thread: transposes larger than the L2 cache ran at 15-16 GB/s on the 2-core build "
    "VM whatever the blocking, prefetching or page size tried (docs/storage.md), and "
    "scale with cores (the all-cores rows)";
constexpr char kGlooLimit[] =
    "Gloo's event loop: where a machine has fewer cores than the ranks' threads, it spins "
    "while a caller holds a connection's lock and can keep that caller off a core for a "
    "scheduler tick (milliseconds), in genesis's group and in Gloo called directly alike "
    "(docs/distributed.md)";
constexpr char kOneRankLimit[] =
    "a world of one rank, whose in-place all_reduce, broadcast and reduce NCCL skips "
    "(0.3-0.4 us): the row is genesis's host cost per call (docs/distributed.md)";
constexpr char kHostPathLimit[] =
    "genesis's host path per operation, which back-to-back operations add to NCCL's own: "
    "0.5-0.7 us above NCCL's call on four-H200 hosts, 0.9-1.8 us on hosts where every "
    "CUDA call is slower. NCCL's own call takes about 10 us on the host at 2 and 4 ranks, "
    "so these rows are bound by the host and the path shows in full. What the path is: "
    "the event each operation records (0.17-0.22 us), four short lock acquisitions (the "
    "state's, the communicator's, the watchdog's list at issue and at release) and the "
    "operation's state (docs/distributed.md, \"The host path of an operation\"); a 1 MiB "
    "operation takes 13-20 us, so the same microsecond shows there. What a row has above "
    "that is not explained";
constexpr char kReplayLimit[] =
    "3,500 of the trace's 8,000 allocations are larger than 1 MiB (3.3 GB live at the "
    "peak), which the pool serves from its free sets (trees "
    "by size) at about 190 ns an operation, while glibc's malloc took 1.1 to 6.3 ms a "
    "pass of that trace on the build VM against the pool's 2.9, depending on what ran "
    "before it in the process (docs/memory.md, \"Replayed traces\")";
constexpr char kPackedLimit[] =
    "copies into 25 MiB buckets: four 25 MiB all_reduces alone reach about 0.83 of one "
    "flat all_reduce, and packing and unpacking move 400 MiB more through memory "
    "(docs/distributed.md, Bucketed all_reduce)";

void AddAllocPairs(std::vector<BenchPair>& pairs) {
  for (int64_t size : kHostPoolSizes) {
    const std::string s = absl::StrCat(size);
    for (int threads : {1, 16}) {
      const std::string t = absl::StrCat("/real_time/threads:", threads);
      // At most malloc's time at every size, on one thread and on 16.
      pairs.push_back(Pair("alloc_cpu", absl::StrCat("host pool, ", SizeName(size), ", ",
                                                     Threads(threads)),
                           "BM_HostPool/" + s + t, "malloc + free", "BM_Malloc/" + s + t,
                           BenchMetric::kTime, 1.0));
    }
    // PyTorch's torch.empty, from Python (no target: the interpreter's call is in it).
    pairs.push_back(FromTorch(
        Pair("alloc_cpu", absl::StrCat("host pool, ", SizeName(size), ", 1 thread"),
             absl::StrCat("BM_HostPool/", s, "/real_time/threads:1"),
             "torch.empty + release, from Python",
             absl::StrCat("BM_TorchEmpty/", s, "/real_time/threads:default")),
        "torch_alloc"));
    // One thread: within 1.5x of the fastest of the others, so of each of them.
    for (const auto& [benchmark, label] : kForeignAllocators) {
      const std::string t = "/real_time/threads:1";
      pairs.push_back(Pair("alloc_cpu",
                           absl::StrCat("host pool, ", SizeName(size), ", 1 thread"),
                           "BM_HostPool/" + s + t, absl::StrCat(label, " malloc + free"),
                           absl::StrCat(benchmark, "/", s, t), BenchMetric::kTime, 1 / 1.5));
    }
    pairs.push_back(Scaling(Pair("alloc_cpu",
                                 absl::StrCat("host pool, ", SizeName(size),
                                              ", 16 threads (throughput)"),
                                 "BM_HostPool/" + s + "/real_time/threads:16",
                                 "the same, 1 thread", "BM_HostPool/" + s + "/real_time/threads:1",
                                 BenchMetric::kTime, kScalingPerCore),
                            16));
  }
  for (int64_t size : kPoolSizes) {
    const std::string s = absl::StrCat(size);
    for (int threads : {1, 16}) {
      const std::string t = absl::StrCat("/real_time/threads:", threads);
      pairs.push_back(Pair("alloc_cuda",
                           absl::StrCat("device pool, ", SizeName(size), ", ", Threads(threads)),
                           "BM_DevicePool/" + s + t, "cudaMallocAsync + cudaFreeAsync",
                           "BM_CudaMallocAsync/" + s + t, BenchMetric::kTime,
                           threads == 1 ? 12 : 0));
    }
    if (size != (64 << 10)) {
      pairs.push_back(Pair("alloc_cuda", absl::StrCat("device pool, ", SizeName(size), ", 1 thread"),
                           "BM_DevicePool/" + s + "/real_time/threads:1", "cudaMalloc + cudaFree",
                           "BM_CudaMalloc/" + s + "/real_time"));
    }
    pairs.push_back(Scaling(Pair("alloc_cuda",
                                 absl::StrCat("device pool, ", SizeName(size),
                                              ", 16 threads (throughput)"),
                                 "BM_DevicePool/" + s + "/real_time/threads:16",
                                 "the same, 1 thread",
                                 "BM_DevicePool/" + s + "/real_time/threads:1",
                                 BenchMetric::kTime, kScalingPerCore),
                            16));
  }
  pairs.push_back(Pair("alloc_cuda", "pinned pool, 64 MiB, 1 thread",
                       "BM_PinnedPool/67108864/real_time/threads:1", "cudaHostAlloc + cudaFreeHost",
                       "BM_CudaHostAlloc/67108864/iterations:20/real_time"));
}

// The copy paths of the sweeps (copy_benchmark, copy_cuda_benchmark): name in the
// benchmark, label, genesis call, baseline call.
struct SweepPath {
  const char* run_id;
  const char* path;
  const char* label;
  const char* genesis;
  const char* baseline;
};
constexpr SweepPath kSweepPaths[] = {
    {"copy_cpu", "Transposed", "CPU transposed float32 square -> contiguous",
     "CopyStridedToContiguous", "Memcpy"},
    {"copy_cpu", "Transposed", "CPU transposed float32 square -> contiguous, all cores",
     "CopyStridedToContiguousAllCores", "Memcpy"},
    {"copy_cpu", "Rows", "CPU every other row of a float32 matrix -> contiguous",
     "CopyStridedToContiguous", "Memcpy"},
    {"copy_cpu", "Rows", "CPU every other row of a float32 matrix -> contiguous, all cores",
     "CopyStridedToContiguousAllCores", "Memcpy"},
    {"copy_cuda", "H2DPinned", "pinned host to device", "CopyBytesAsync", "CudaMemcpyAsync"},
    {"copy_cuda", "D2HPinned", "device to pinned host", "CopyBytesAsync", "CudaMemcpyAsync"},
    {"copy_cuda", "D2D", "device to device", "CopyBytesAsync", "CudaMemcpyAsync"},
    {"copy_cuda", "H2DPageable", "pageable host to device", "CopyBytes", "CudaMemcpy"},
    {"copy_cuda", "D2HPageable", "device to pageable host", "CopyBytes", "CudaMemcpy"},
};

void AddCopyPairs(std::vector<BenchPair>& pairs) {
  for (const SweepPath& p : kSweepPaths) {
    const bool cpu = std::string(p.run_id) == "copy_cpu";
    const char* time = cpu ? "/real_time" : "/manual_time";
    for (int64_t size : kCopyTableSizes) {
      if (cpu && size > (64 << 20)) continue;
      const std::string s = absl::StrCat(size);
      // CPU strided copies: at least half of memcpy's bandwidth.
      BenchPair pair =
          Pair(p.run_id, absl::StrCat(p.label, ", ", SizeName(size)),
               absl::StrCat("BM_Copy_", p.path, "_", p.genesis, "/", s, time), p.baseline,
               absl::StrCat("BM_Copy_", p.path, "_", p.baseline, "/", s, time),
               BenchMetric::kBandwidth, cpu ? 0.5 : 0);
      if (cpu && std::string(p.path) == "Transposed" &&
          std::string(p.genesis) == "CopyStridedToContiguous") {
        pair.limits.push_back({kTransposeLimit});
      }
      pairs.push_back(std::move(pair));
    }
  }
  const BenchMetric bw = BenchMetric::kBandwidth;
  for (const char* dir : {"H2D", "D2H"}) {
    const std::string d = dir;
    const std::string base = "BM_" + d + "_Pinned256MiB_CudaMemcpyAsync/manual_time";
    pairs.push_back(Pair("copy_cuda_single", d + " pinned 256 MiB, CopyBytesAsync",
                         "BM_" + d + "_Pinned256MiB_CopyBytesAsync/manual_time",
                         "cudaMemcpyAsync", base, bw, 0.97));
    pairs.push_back(Pair("copy_cuda_single", d + " pinned 256 MiB, batch copier",
                         "BM_" + d + "_Pinned256MiB_BatchCopier/manual_time", "cudaMemcpyAsync",
                         base, bw, 0.97));
    pairs.push_back(Pair("copy_cuda_single", d + " pageable 256 MiB, CopyBytes",
                         "BM_" + d + "_Pageable256MiB_CopyBytes/manual_time", "cudaMemcpy",
                         "BM_" + d + "_Pageable256MiB_CudaMemcpy/manual_time", bw, 4));
  }
  pairs.push_back(Pair("copy_cuda_single", "H2D + D2H pinned 256 MiB at once, batch copier",
                       "BM_Bidir_Pinned256MiB_BatchCopier/manual_time",
                       "cudaMemcpyAsync, one direction",
                       "BM_Bidir_Pinned256MiB_H2DOnly_CudaMemcpyAsync/manual_time", bw, 1.8));
  pairs.push_back(Pair("copy_cuda_single", "H2D + D2H pinned 256 MiB at once, batch copier",
                       "BM_Bidir_Pinned256MiB_BatchCopier/manual_time",
                       "cudaMemcpyAsync on two streams",
                       "BM_Bidir_Pinned256MiB_TwoStreamsCudaMemcpyAsync/manual_time", bw));
  const std::string pipeline = "/threads:8/chunk_kib:4096/buffers:4/real_time";
  pairs.push_back(Pair("copy_cuda_staging", "pageable 256 MiB to device, staging pipeline",
                       "BM_PageableToDevice_StagingPipeline" + pipeline, "cudaMemcpy",
                       "BM_PageableToDevice_CudaMemcpy/real_time", bw, 4));
  pairs.push_back(Pair("copy_cuda_staging", "device to pageable 256 MiB, staging pipeline",
                       "BM_DeviceToPageable_StagingPipeline" + pipeline, "cudaMemcpy",
                       "BM_DeviceToPageable_CudaMemcpy/real_time", bw, 4));
}

void AddBatchPairs(std::vector<BenchPair>& pairs) {
  struct Batch {
    const char* name;
    const char* label;
  };
  for (const Batch& b : {Batch{"D2D_1024x16KiB", "1024 x 16 KiB device to device"},
                         Batch{"D2D_1024x256KiB", "1024 x 256 KiB device to device"},
                         Batch{"H2D_Pinned1024x16KiB", "1024 x 16 KiB pinned host to device"}}) {
    const std::string prefix = absl::StrCat("BM_", b.name, "_");
    pairs.push_back(Pair("batch_cuda", b.label, prefix + "BatchCopier/manual_time",
                         "loop of cudaMemcpyAsync", prefix + "CudaMemcpyAsyncLoop/manual_time"));
    pairs.push_back(Pair("batch_cuda", b.label, prefix + "BatchCopier/manual_time",
                         "cudaMemcpyBatchAsync", prefix + "CudaMemcpyBatchAsync/manual_time"));
  }
  pairs.push_back(Pair("batch_cuda", "1024 x 16 KiB device to device, planned at each call",
                       "BM_D2D_1024x16KiB_BatchCopier_WithPlanning/manual_time",
                       "cudaMemcpyBatchAsync", "BM_D2D_1024x16KiB_CudaMemcpyBatchAsync/manual_time"));
  pairs.push_back(Pair("batch_cuda", "1024 mixed 256 B .. 4 MiB device to device",
                       "BM_D2D_Mixed1024_BatchCopier/manual_time", "loop of cudaMemcpyAsync",
                       "BM_D2D_Mixed1024_CudaMemcpyAsyncLoop/manual_time"));
  pairs.push_back(Pair("batch_cuda", "1024 mixed 256 B .. 4 MiB device to device",
                       "BM_D2D_Mixed1024_BatchCopier/manual_time",
                       "one cudaMemcpyAsync of the total",
                       "BM_D2D_Mixed1024_OneCudaMemcpyAsync/manual_time", BenchMetric::kTime,
                       0.7));
}

void AddPeerPairs(std::vector<BenchPair>& pairs) {
  pairs.push_back(Pair("peer_batch_cuda", "256 MiB cuda:0 -> cuda:1, batch copier",
                       "BM_Peer_256MiB_BatchCopier/manual_time", "cudaMemcpyPeerAsync",
                       "BM_Peer_256MiB_CudaMemcpyPeerAsync/manual_time", BenchMetric::kBandwidth,
                       0.97));
  pairs.push_back(Pair("peer_batch_cuda", "1024 x 64 KiB cuda:0 -> cuda:1, batch copier",
                       "BM_Peer_1024x64KiB_BatchCopier/manual_time", "loop of cudaMemcpyPeerAsync",
                       "BM_Peer_1024x64KiB_CudaMemcpyPeerAsyncLoop/manual_time"));
  // Rows for up to 8 GPUs; those of GPUs this machine lacks are left out of the report.
  for (const char* kind : {"Bandwidth", "Latency"}) {
    for (int from = 0; from < kMaxPeerGpus; ++from) {
      for (int to = 0; to < kMaxPeerGpus; ++to) {
        if (from == to) continue;
        const std::string suffix = absl::StrCat("/from:", from, "/to:", to, "/manual_time");
        const std::string k = kind;
        BenchPair p = Pair("peer_matrix_cuda",
                           absl::StrCat(k == "Bandwidth" ? "256 MiB" : "4 B latency", ", cuda:",
                                        from, " -> cuda:", to, ", CopyBytesAsync"),
                           "BM_PeerMatrix_" + k + "_CopyBytesAsync" + suffix,
                           "cudaMemcpyPeerAsync",
                           "BM_PeerMatrix_" + k + "_CudaMemcpyPeerAsync" + suffix,
                           k == "Bandwidth" ? BenchMetric::kBandwidth : BenchMetric::kTime);
        p.optional = true;
        pairs.push_back(std::move(p));
      }
    }
  }
}

void AddConvertPairs(std::vector<BenchPair>& pairs) {
  const std::string n = "/1048576";
  // The scalar functions: at most the compiler's own conversion's time.
  pairs.push_back(Pair("convert_cpu_half", "float -> float16, 2^20 values",
                       "BM_FloatToHalf_Genesis" + n, "GCC _Float16",
                       "BM_FloatToHalf_CompilerFloat16" + n, BenchMetric::kTime, 1.0));
  pairs.push_back(Pair("convert_cpu_half", "float16 -> float, 2^20 values",
                       "BM_HalfToFloat_Genesis" + n, "GCC _Float16",
                       "BM_HalfToFloat_CompilerFloat16" + n, BenchMetric::kTime, 1.0));
  // CPU conversions: at least 0.8 of memcpy of the same bytes.
  pairs.push_back(Pair("convert_cpu_half", "float -> bfloat16, 2^20 values",
                       "BM_FloatToBFloat16_Genesis" + n, "memcpy of the same bytes",
                       "BM_FloatRead_HalfWrite_Memcpy" + n, BenchMetric::kTime, 0.8));
  const BenchMetric bw = BenchMetric::kBandwidth;
  // label, benchmark, PyTorch's run, dtype name in PyTorch.
  constexpr const char* kConversions[][4] = {
      {"float32 -> bfloat16", "ConvertFloat32ToBFloat16", "float32_to_bfloat16", "bfloat16"},
      {"bfloat16 -> float32", "ConvertBFloat16ToFloat32", "bfloat16_to_float32", "float32"},
      {"float32 -> float16", "ConvertFloat32ToFloat16", "float32_to_float16", "float16"},
      {"float16 -> float32", "ConvertFloat16ToFloat32", "float16_to_float32", "float32"}};
  for (const auto& [label, genesis, torch, to] : kConversions) {
    // On the calling thread and on every core (kAllCores): at least 0.8 of memcpy of the
    // same bytes, and at least Tensor.to(dtype)'s bandwidth on as many threads.
    for (const auto& [threads, threads_label] : kTorchThreads) {
      const bool one = std::string(threads) == "1";
      const std::string figure = absl::StrCat("BM_", genesis, one ? "" : "AllCores", "/real_time");
      const std::string row = absl::StrCat(label, ", 4096 x 4096", one ? "" : ", all cores");
      pairs.push_back(Pair("convert_cpu", row, figure, "memcpy of the same bytes",
                           "BM_Memcpy/50331648/real_time", bw, 0.8));
      pairs.push_back(FromTorch(
          Pair("convert_cpu", row, figure,
               absl::StrCat("Tensor.to(torch.", to, "), ", threads_label),
               absl::StrCat("BM_TorchTo/", torch, "/real_time/threads:", threads), bw, 1.0),
          "torch_convert"));
    }
  }
  pairs.push_back(Pair("convert_cuda", "float32 -> bfloat16, 4096 x 4096",
                       "BM_ConvertCudaFloat32ToBFloat16/manual_time",
                       "cudaMemcpyAsync of the same bytes",
                       "BM_CudaMemcpyAsync/50331648/manual_time", bw, 0.85));
  pairs.push_back(Pair("convert_cuda", "bfloat16 -> float32, 4096 x 4096",
                       "BM_ConvertCudaBFloat16ToFloat32/manual_time",
                       "cudaMemcpyAsync of the same bytes",
                       "BM_CudaMemcpyAsync/50331648/manual_time", bw, 0.85));
  // On the calling thread and on every core: at least half of memcpy's bandwidth, and
  // at least PyTorch's contiguous() on as many threads.
  for (const auto& [threads, threads_label] : kTorchThreads) {
    const bool one = std::string(threads) == "1";
    const std::string figure =
        absl::StrCat("BM_CopyTransposedFloat32", one ? "" : "AllCores", "/real_time");
    const std::string row =
        absl::StrCat("transposed float32 4096 x 4096", one ? "" : ", all cores");
    pairs.push_back(Pair("contiguous_cpu", row, figure, "memcpy of the same bytes",
                         "BM_Memcpy/67108864/real_time", bw, 0.5));
    pairs.push_back(FromTorch(
        Pair("contiguous_cpu", row, figure,
             absl::StrCat("Tensor.t().contiguous(), ", threads_label),
             absl::StrCat("BM_TorchContiguous/real_time/threads:", threads), bw, 1.0),
        "torch_contiguous"));
  }
  pairs.push_back(Pair("contiguous_cuda", "transposed float32 4096 x 4096",
                       "BM_CopyStridedCudaTransposedFloat32/manual_time",
                       "cudaMemcpyAsync of the same bytes",
                       "BM_CudaMemcpyAsync/67108864/manual_time", bw, 0.75));
}

void AddReplayPairs(std::vector<BenchPair>& pairs) {
  for (const char* trace : kTraces) {
    // At most malloc's time for the whole trace.
    BenchPair p = Pair("replay_cpu", absl::StrCat(trace, ", host pool"),
                       absl::StrCat("BM_Replay_HostPool/", trace, "/real_time"), "malloc + free",
                       absl::StrCat("BM_Replay_Malloc/", trace, "/real_time"),
                       BenchMetric::kTime, 1.0);
    if (std::string(trace) == "resnet50_train") p.limits.push_back({kReplayLimit});
    p.optional = true;  // Only the traces that were found.
    pairs.push_back(std::move(p));
  }
}

// Collectives: genesis's group beside the library called directly, per operation and
// size (run names "<op>/<genesis|gloo|nccl>/<bytes>" of collectives_benchmark).
constexpr const char* kCollectiveOps[] = {"all_reduce", "all_gather", "reduce_scatter",
                                          "broadcast",  "reduce",     "all_to_all",
                                          "send_recv"};

// Bucketed all_reduce of NCCL against one flat all_reduce: 0.95 with views of one buffer,
// 0.9 with packed storages; none for Gloo.
double BucketedTarget(const std::string& library, const std::string& how) {
  if (library != "nccl") return 0;
  return how == "packed" ? 0.9 : 0.95;
}

void AddCollectivePairs(std::vector<BenchPair>& pairs) {
  for (const auto& [run, library] : {std::pair<const char*, const char*>{"collectives_cpu", "gloo"},
                                     {"collectives_cuda", "nccl"}}) {
    for (const char* op : kCollectiveOps) {
      for (int64_t bytes : {int64_t{8} << 10, int64_t{1} << 20, int64_t{64} << 20,
                            int64_t{1} << 30}) {
        const bool small = bytes < (1 << 20);
        const bool nccl = std::string(library) == "nccl";
        // NCCL: from 1 MiB 98% of its bus bandwidth, below within 1 us of its time. Gloo:
        // 95% of it for all_reduce and broadcast at every size.
        const bool gloo_target = std::string(op) == "all_reduce" || std::string(op) == "broadcast";
        BenchPair p = Pair(run, absl::StrCat(op, ", ", SizeName(bytes)),
                           absl::StrCat(op, "/genesis/", bytes),
                           absl::StrCat(library, " called directly"),
                           absl::StrCat(op, "/", library, "/", bytes),
                           small ? BenchMetric::kTime : BenchMetric::kBusBandwidth,
                           nccl ? (small ? 0 : 0.98) : (gloo_target ? 0.95 : 0));
        if (nccl && small) p.max_extra_ns = 1000;
        const std::string o = op;
        if (!nccl && gloo_target) {
          // Two ranks of two busy threads each.
          p.limits.push_back({kGlooLimit, /*max_cpus=*/3});
        }
        if (nccl && (o == "all_reduce" || o == "broadcast" || o == "reduce")) {
          p.limits.push_back({kOneRankLimit, 0, /*min_gpus=*/1, /*max_gpus=*/1});
        }
        if (nccl && bytes <= (int64_t{1} << 20)) {
          p.limits.push_back({kHostPathLimit, 0, /*min_gpus=*/2});
        }
        p.optional = true;  // Sizes and operations a run did not cover.
        pairs.push_back(std::move(p));
      }
    }
    for (const char* how : {"packed", "views"}) {
      BenchPair p = Pair(run, absl::StrCat("bucketed all_reduce of 1,000 gradients (100 MiB), ",
                                           std::string(how) == "packed" ? "packed storages"
                                                                        : "views of a flat buffer"),
                         absl::StrCat("bucketed_all_reduce/", how), "one flat all_reduce",
                         "bucketed_all_reduce/flat", BenchMetric::kTime,
                         BucketedTarget(library, how));
      if (std::string(how) == "packed") p.limits.push_back({kPackedLimit});
      p.optional = true;
      pairs.push_back(std::move(p));
    }
  }
}

std::vector<BenchPair> MakePairs() {
  std::vector<BenchPair> pairs;
  AddAllocPairs(pairs);
  AddCopyPairs(pairs);
  AddBatchPairs(pairs);
  AddPeerPairs(pairs);
  AddConvertPairs(pairs);
  AddReplayPairs(pairs);
  AddCollectivePairs(pairs);
  return pairs;
}

}  // namespace

const char* BenchDeviceName(BenchDevice device) {
  return device == BenchDevice::kCpu ? "cpu" : "cuda";
}

const std::vector<BenchSuite>& BenchSuites() {
  static const auto* suites = new std::vector<BenchSuite>(MakeSuites());
  return *suites;
}

const std::vector<BenchRun>& BenchRuns() {
  static const auto* runs = new std::vector<BenchRun>(MakeRuns());
  return *runs;
}

const std::vector<BenchPair>& BenchPairs() {
  static const auto* pairs = new std::vector<BenchPair>(MakePairs());
  return *pairs;
}

std::vector<const BenchRun*> RunsOfSuite(const std::string& suite) {
  std::vector<const BenchRun*> runs;
  for (const BenchRun& r : BenchRuns()) {
    if (r.suite == suite) runs.push_back(&r);
  }
  return runs;
}

const BenchRun* FindRun(const std::string& id) {
  for (const BenchRun& r : BenchRuns()) {
    if (r.id == id) return &r;
  }
  return nullptr;
}

absl::StatusOr<std::vector<std::string>> ParseSuiteList(const std::string& text) {
  std::vector<std::string> names;
  for (const BenchSuite& s : BenchSuites()) names.push_back(s.name);
  const std::string trimmed(absl::StripAsciiWhitespace(text));
  if (trimmed.empty() || trimmed == "all") return names;
  std::vector<std::string> chosen;
  for (absl::string_view part : absl::StrSplit(trimmed, ',', absl::SkipWhitespace())) {
    const std::string name(absl::StripAsciiWhitespace(part));
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      return absl::InvalidArgumentError(absl::StrCat("--suite: unknown suite '", name,
                                                     "'; known: ", absl::StrJoin(names, ", "),
                                                     " (or all)"));
    }
    chosen.push_back(name);
  }
  std::vector<std::string> ordered;
  for (const std::string& n : names) {
    if (std::find(chosen.begin(), chosen.end(), n) != chosen.end()) ordered.push_back(n);
  }
  return ordered;
}

}  // namespace genesis::cli
