// Batches of copies: the batch copier (genesis/transfer/batch_copy.h) against what CUDA
// offers for the same batch, in one binary: a loop of cudaMemcpyAsync (or
// cudaMemcpyPeerAsync), one cudaMemcpyBatchAsync, a plain fused copy kernel whose
// descriptors sit in device memory already (fused_copy_baselines.h), and for single
// large copies cudaMemcpyAsync and genesis::transfer::CopyBytesAsync. The batches: 1,024
// copies of 16 KiB and of 256 KiB within cuda:0 (16 KiB also with the sources in a
// shuffled order, _Scattered, as are the 64 KiB peer copies); 1,024 copies of mixed
// sizes (256 B to 4 MiB, log-uniform) within cuda:0, beside one copy of their total
// size; 1,024 copies of 16 KiB from pinned host memory; 256 MiB between pinned host
// memory and cuda:0, one direction and both at once; 256 MiB between pageable host
// memory and cuda:0; and, with two GPUs, cuda:0 to cuda:1 (peer access, pushing and
// pulling, and the staged fallback without it). BM_D2D_1024x16KiB_PlanOnly
// times planning alone on this machine's host; BM_Launch_EmptyKernel_* what a launch
// costs by the size of its parameters.
//
//   gpu_bundle/benchmarks/benchmarks_transfer_batch_copy_cuda_benchmark
//       --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// The plan of each batch is printed to stderr before the benchmarks run.
//
// Timing (manual time, the same for every row so that ratios are fair): each iteration
// records an event on a non-blocking stream `s` of cuda:0, queues the operation kRuns
// times back to back on `s`, records a second event, waits for it, and reports the
// elapsed time (the time column is per kRuns operations): where the host takes longer
// to queue an operation than the device to run it, this is the host's rate, as a loop
// that does nothing else sees it. The same iteration then queues kRuns more behind a
// kernel that holds `s` until all are queued: the counters device_us (device time per
// operation, by events) and host_us (host time to queue one) separate the two, and
// device_GBps is the bytes of one operation per device_us. The batch copier queues with
// CopyAsync (rows _WithPlanning: planning at every call, as a training loop does), or
// with Execute of a plan made once outside the loop. Every operation runs once before
// the timed loop. Pageable rows are synchronous and timed with std::chrono, one
// operation per iteration. bytes_per_second counts the bytes one operation moves once
// (not read plus write); for both directions at once, both. Google Benchmark prints
// binary units (T/s is TiB/s); device_GBps is decimal.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "benchmark/benchmark.h"
#include "benchmarks/transfer/fused_copy_baselines.h"
#include "benchmarks/transfer/shuffled_sources.h"
#include "genesis/core/device.h"
#include "genesis/transfer/batch_copy.h"
#include "genesis/transfer/batch_plan.h"
#include "genesis/transfer/copy.h"

namespace genesis::transfer {
namespace {

constexpr int kRuns = 10;                       // Operations per timed iteration.
constexpr size_t kLarge = size_t{256} << 20;    // Single large copies.
constexpr size_t kCount = 1024;                 // Copies per batch.
constexpr size_t kAlignment = 512;              // Of every copy's offset in a batch.
constexpr size_t kMixedMin = 256;               // Mixed sizes: bounds, and multiple.
constexpr size_t kMixedMax = size_t{4} << 20;

// The batches. Each is a vector of requests, built once.
enum class Batch {
  kD2D16KiB,         // 1,024 x 16 KiB within cuda:0.
  kD2D16KiBScattered,  // The same, sources in a shuffled order.
  kD2D256KiB,        // 1,024 x 256 KiB within cuda:0.
  kD2DMixed,         // 1,024 of 256 B .. 4 MiB within cuda:0.
  kH2DPinned16KiB,   // 1,024 x 16 KiB, pinned host to cuda:0.
  kH2DPinned256MiB,  // One copy, pinned host to cuda:0.
  kD2HPinned256MiB,  // One copy, cuda:0 to pinned host.
  kBothPinned256MiB, // Two copies on different buffers: one H2D, one D2H.
  kPeer256MiB,       // One copy, cuda:0 to cuda:1 (two GPUs only).
  kPeer64KiB,        // 1,024 x 64 KiB, cuda:0 to cuda:1 (two GPUs only).
  kPeer64KiBScattered,  // The same, sources in a shuffled order.
  kNumBatches,
};

// The copiers, each made with its own options.
enum class CopierKind {
  kDefault,
  kAllFused,  // PlanOptions.fused_max_bytes = 4 MiB: every mixed copy is fused.
  kNoPeer,    // disable_peer_access: GPU-to-GPU copies are staged through the host.
  kPeerPull,  // PlanOptions.peer_fused_kernel_pushes unset: fused peer kernels pull.
  kNumCopiers,
};

absl::Status CudaStatus(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(std::string(what) + ": " + cudaGetErrorName(err) + ": " +
                             cudaGetErrorString(err));
}

void Check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(err));
    std::exit(1);
  }
}

void Skip(benchmark::State& state, const absl::Status& status) {
  state.SkipWithError(status.ToString().c_str());
}

size_t AlignUp(size_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

// The mixed batch's sizes: log-uniform in [kMixedMin, kMixedMax], rounded up to a
// multiple of kMixedMin, from a fixed seed.
std::vector<size_t> MixedSizes() {
  std::mt19937 rng(42);
  std::uniform_real_distribution<double> log_size(std::log(double{kMixedMin}),
                                                  std::log(double{kMixedMax}));
  std::vector<size_t> sizes(kCount);
  for (size_t& size : sizes) {
    const size_t bytes = static_cast<size_t>(std::ceil(std::exp(log_size(rng))));
    size = std::clamp((bytes + kMixedMin - 1) / kMixedMin * kMixedMin, kMixedMin, kMixedMax);
  }
  return sizes;
}

// Bytes spanned by copies of `sizes` laid out one after another, each kAlignment-aligned.
size_t LayoutBytes(const std::vector<size_t>& sizes) {
  size_t end = 0;
  for (size_t size : sizes) end = AlignUp(end) + size;
  return AlignUp(end);
}

// One side of the copies of a batch: the start of its buffer, its device, whether pinned.
struct Side {
  void* base = nullptr;
  Device device;
  bool pinned = false;
};

// Request i copies sizes[i] bytes; copies lie one after another on both sides, each at a
// kAlignment-aligned offset (the same offset on both sides).
std::vector<CopyRequest> MakeBatch(Side src, Side dst, const std::vector<size_t>& sizes) {
  std::vector<CopyRequest> requests;
  size_t offset = 0;
  for (size_t size : sizes) {
    offset = AlignUp(offset);
    requests.push_back({.src = static_cast<const char*>(src.base) + offset,
                        .src_device = src.device,
                        .src_pinned = src.pinned,
                        .dst = static_cast<char*>(dst.base) + offset,
                        .dst_device = dst.device,
                        .dst_pinned = dst.pinned,
                        .bytes = size});
    offset += size;
  }
  return requests;
}

size_t TotalBytes(const std::vector<CopyRequest>& requests) {
  size_t total = 0;
  for (const CopyRequest& r : requests) total += r.bytes;
  return total;
}

// Buffers, streams, events and batches, made once; copiers made on first use.
struct Buffers {
  int device_count = 0;
  cudaStream_t stream = nullptr;         // `s`: every operation is queued on it.
  cudaStream_t second_stream = nullptr;  // The hand-written two-stream baseline's other.
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  cudaEvent_t fork = nullptr;  // Untimed: ordering between the two streams.
  cudaEvent_t join = nullptr;
  cudaEvent_t held_start = nullptr;  // Device time behind a hold kernel.
  cudaEvent_t held_stop = nullptr;
  int* hold_flag = nullptr;           // Pinned: the hold kernel waits for it.
  bench::PlainCopy* device_descriptors[static_cast<int>(Batch::kNumBatches)] = {};
  void* device_src = nullptr;  // kLarge each, on cuda:0.
  void* device_dst = nullptr;
  void* mixed_src = nullptr;  // LayoutBytes(mixed_sizes) each, on cuda:0.
  void* mixed_dst = nullptr;
  void* pinned_a = nullptr;  // kLarge each, pinned host memory.
  void* pinned_b = nullptr;
  void* peer_dst = nullptr;  // kLarge, on cuda:1 (two GPUs only).
  std::vector<char> pageable = std::vector<char>(kLarge, 1);  // Touched: no first touch.
  std::vector<size_t> mixed_sizes = MixedSizes();
  std::vector<CopyRequest> batches[static_cast<int>(Batch::kNumBatches)];
  std::unique_ptr<BatchCopier> copiers[static_cast<int>(CopierKind::kNumCopiers)];

  Buffers() {
    Check(cudaGetDeviceCount(&device_count), "cudaGetDeviceCount");
    if (device_count == 0) Check(cudaErrorNoDevice, "cudaGetDeviceCount");
    Check(cudaSetDevice(0), "cudaSetDevice(0)");
    Check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    Check(cudaStreamCreateWithFlags(&second_stream, cudaStreamNonBlocking),
          "cudaStreamCreate");
    Check(cudaEventCreate(&start), "cudaEventCreate");
    Check(cudaEventCreate(&stop), "cudaEventCreate");
    Check(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming), "cudaEventCreate");
    Check(cudaEventCreateWithFlags(&join, cudaEventDisableTiming), "cudaEventCreate");
    Check(cudaEventCreate(&held_start), "cudaEventCreate");
    Check(cudaEventCreate(&held_stop), "cudaEventCreate");
    Check(cudaHostAlloc(reinterpret_cast<void**>(&hold_flag), sizeof(int),
                        cudaHostAllocDefault),
          "cudaHostAlloc");
    *hold_flag = 0;
    const size_t mixed_span = LayoutBytes(mixed_sizes);
    Check(cudaMalloc(&device_src, kLarge), "cudaMalloc");
    Check(cudaMalloc(&device_dst, kLarge), "cudaMalloc");
    Check(cudaMalloc(&mixed_src, mixed_span), "cudaMalloc");
    Check(cudaMalloc(&mixed_dst, mixed_span), "cudaMalloc");
    Check(cudaMemset(device_src, 1, kLarge), "cudaMemset");
    Check(cudaMemset(mixed_src, 1, mixed_span), "cudaMemset");
    Check(cudaHostAlloc(&pinned_a, kLarge, cudaHostAllocDefault), "cudaHostAlloc");
    Check(cudaHostAlloc(&pinned_b, kLarge, cudaHostAllocDefault), "cudaHostAlloc");
    std::memset(pinned_a, 1, kLarge);
    std::memset(pinned_b, 1, kLarge);
    if (device_count >= 2) {
      Check(cudaSetDevice(1), "cudaSetDevice(1)");
      Check(cudaMalloc(&peer_dst, kLarge), "cudaMalloc on cuda:1");
      EnablePeerAccess(1, 0);
      Check(cudaSetDevice(0), "cudaSetDevice(0)");
      EnablePeerAccess(0, 1);
    }
    Check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");

    const Side device_src_side{device_src, Device::Cuda(0)};
    const Side device_dst_side{device_dst, Device::Cuda(0)};
    const Side pinned_a_side{pinned_a, Device::Cpu(), /*pinned=*/true};
    const Side pinned_b_side{pinned_b, Device::Cpu(), /*pinned=*/true};
    Set(Batch::kD2D16KiB,
        MakeBatch(device_src_side, device_dst_side, Sizes(kCount, size_t{16} << 10)));
    Set(Batch::kD2D16KiBScattered, benchmarks::ShuffledSources(Requests(Batch::kD2D16KiB)));
    Set(Batch::kD2D256KiB,
        MakeBatch(device_src_side, device_dst_side, Sizes(kCount, size_t{256} << 10)));
    Set(Batch::kD2DMixed, MakeBatch({mixed_src, Device::Cuda(0)},
                                    {mixed_dst, Device::Cuda(0)}, mixed_sizes));
    Set(Batch::kH2DPinned16KiB,
        MakeBatch(pinned_a_side, device_dst_side, Sizes(kCount, size_t{16} << 10)));
    Set(Batch::kH2DPinned256MiB, MakeBatch(pinned_a_side, device_dst_side, {kLarge}));
    Set(Batch::kD2HPinned256MiB, MakeBatch(device_src_side, pinned_b_side, {kLarge}));
    std::vector<CopyRequest> both = MakeBatch(pinned_a_side, device_dst_side, {kLarge});
    both.push_back(MakeBatch(device_src_side, pinned_b_side, {kLarge}).front());
    Set(Batch::kBothPinned256MiB, std::move(both));
    if (device_count >= 2) {
      const Side peer_side{peer_dst, Device::Cuda(1)};
      Set(Batch::kPeer256MiB, MakeBatch(device_src_side, peer_side, {kLarge}));
      Set(Batch::kPeer64KiB,
          MakeBatch(device_src_side, peer_side, Sizes(kCount, size_t{64} << 10)));
      Set(Batch::kPeer64KiBScattered,
          benchmarks::ShuffledSources(Requests(Batch::kPeer64KiB)));
    }
  }

  const std::vector<CopyRequest>& Requests(Batch batch) const {
    return batches[static_cast<int>(batch)];
  }

  // The batch's copies as descriptors in device memory (for the plain fused kernel),
  // uploaded at the first call.
  const bench::PlainCopy* DeviceDescriptors(Batch batch) {
    bench::PlainCopy*& d = device_descriptors[static_cast<int>(batch)];
    if (d != nullptr) return d;
    const std::vector<bench::PlainCopy> copies = PlainCopies(batch);
    Check(cudaMalloc(reinterpret_cast<void**>(&d), sizeof(bench::PlainCopy) * copies.size()),
          "cudaMalloc");
    Check(cudaMemcpy(d, copies.data(), sizeof(bench::PlainCopy) * copies.size(),
                     cudaMemcpyHostToDevice),
          "cudaMemcpy");
    return d;
  }

  std::vector<bench::PlainCopy> PlainCopies(Batch batch) const {
    std::vector<bench::PlainCopy> copies;
    for (const CopyRequest& r : Requests(batch)) copies.push_back({r.src, r.dst, r.bytes});
    return copies;
  }

  // The copier of `kind`, made on first use.
  absl::StatusOr<BatchCopier*> Copier(CopierKind kind) {
    std::unique_ptr<BatchCopier>& copier = copiers[static_cast<int>(kind)];
    if (copier != nullptr) return copier.get();
    BatchCopyOptions options;
    if (kind == CopierKind::kAllFused) options.plan.fused_max_bytes = kMixedMax;
    if (kind == CopierKind::kNoPeer) options.disable_peer_access = true;
    if (kind == CopierKind::kPeerPull) options.plan.peer_fused_kernel_pushes = false;
    absl::StatusOr<std::unique_ptr<BatchCopier>> made = BatchCopier::Create(options);
    if (!made.ok()) return made.status();
    copier = *std::move(made);
    return copier.get();
  }

 private:
  static std::vector<size_t> Sizes(size_t count, size_t bytes) {
    return std::vector<size_t>(count, bytes);
  }

  void Set(Batch batch, std::vector<CopyRequest> requests) {
    batches[static_cast<int>(batch)] = std::move(requests);
  }

  // With the current device `from`. Without peer access between the two, the peer
  // rows measure what CUDA and the copier do without it.
  static void EnablePeerAccess(int from, int to) {
    int can_access = 0;
    Check(cudaDeviceCanAccessPeer(&can_access, from, to), "cudaDeviceCanAccessPeer");
    if (!can_access) return;
    const cudaError_t err = cudaDeviceEnablePeerAccess(to, 0);
    if (err == cudaErrorPeerAccessAlreadyEnabled) {
      cudaGetLastError();  // Clears it.
      return;
    }
    Check(err, "cudaDeviceEnablePeerAccess");
  }
};

Buffers& Get() {
  static Buffers* buffers = new Buffers();
  return *buffers;
}

// Runs `op` (which queues one operation on the stream and returns its status) once to
// warm up, then per iteration twice kRuns times:
//
//  1. back to back between two events on the stream: the iteration time (so that the
//     benchmark's iteration count follows the real time spent) is the events' elapsed
//     time for all kRuns. Where queueing an operation takes the host longer than the
//     device takes to run it, this is the host's rate: what a loop that does nothing
//     else sees;
//  2. queued behind a kernel that holds the stream until all kRuns are queued: the
//     counter device_us is the device's time per operation (events), host_us the host's
//     time to queue one (steady clock), with nothing of either in the other.
//
// bytes_per_second counts kRuns operations per iteration (of pass 1); device_GBps is
// bytes per device_us, in decimal GB/s.
template <typename Op>
void TimeOnStream(benchmark::State& state, size_t bytes_per_op, Op op) {
  Buffers& b = Get();
  absl::Status status = op();
  if (status.ok()) status = CudaStatus(cudaStreamSynchronize(b.stream), "warm-up");
  if (!status.ok()) {
    Skip(state, status);
    return;
  }
  double host_s = 0, device_s = 0;
  for (auto _ : state) {
    status = CudaStatus(cudaEventRecord(b.start, b.stream), "cudaEventRecord");
    for (int i = 0; i < kRuns && status.ok(); ++i) status = op();
    if (status.ok()) status = CudaStatus(cudaEventRecord(b.stop, b.stream), "cudaEventRecord");
    if (status.ok()) status = CudaStatus(cudaEventSynchronize(b.stop), "cudaEventSynchronize");
    float ms = 0;
    if (status.ok()) {
      status = CudaStatus(cudaEventElapsedTime(&ms, b.start, b.stop), "cudaEventElapsedTime");
    }
    // Pass 2, held.
    *b.hold_flag = 0;
    if (status.ok()) status = CudaStatus(bench::LaunchHold(b.hold_flag, 200, b.stream), "hold");
    if (status.ok()) {
      status = CudaStatus(cudaEventRecord(b.held_start, b.stream), "cudaEventRecord");
    }
    const auto begin = std::chrono::steady_clock::now();
    for (int i = 0; i < kRuns && status.ok(); ++i) status = op();
    const auto end = std::chrono::steady_clock::now();
    if (status.ok()) {
      status = CudaStatus(cudaEventRecord(b.held_stop, b.stream), "cudaEventRecord");
    }
    __atomic_store_n(b.hold_flag, 1, __ATOMIC_RELEASE);
    if (status.ok()) {
      status = CudaStatus(cudaEventSynchronize(b.held_stop), "cudaEventSynchronize");
    }
    float held_ms = 0;
    if (status.ok()) {
      status = CudaStatus(cudaEventElapsedTime(&held_ms, b.held_start, b.held_stop),
                          "cudaEventElapsedTime");
    }
    if (!status.ok()) {
      Skip(state, status);
      break;
    }
    state.SetIterationTime(ms / 1000.0);
    host_s += std::chrono::duration<double>(end - begin).count();
    device_s += held_ms / 1000.0;
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * kRuns * bytes_per_op));
  const double ops = static_cast<double>(state.iterations()) * kRuns;
  if (ops > 0) {
    state.counters["host_us"] = host_s / ops * 1e6;
    state.counters["device_us"] = device_s / ops * 1e6;
    state.counters["device_GBps"] =
        device_s > 0 ? static_cast<double>(bytes_per_op) * ops / device_s / 1e9 : 0;
  }
}

// For synchronous operations: `op` once to warm up, then once per iteration, timed on
// the host.
template <typename Op>
void TimeOnHost(benchmark::State& state, size_t bytes_per_op, Op op) {
  absl::Status status = op();
  if (!status.ok()) {
    Skip(state, status);
    return;
  }
  for (auto _ : state) {
    const auto begin = std::chrono::steady_clock::now();
    status = op();
    const auto end = std::chrono::steady_clock::now();
    if (!status.ok()) {
      Skip(state, status);
      break;
    }
    state.SetIterationTime(std::chrono::duration<double>(end - begin).count());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes_per_op));
}

// Queues one request with the copy engine: cudaMemcpyPeerAsync between two GPUs,
// cudaMemcpyAsync otherwise.
absl::Status QueueCopy(const CopyRequest& r, cudaStream_t stream) {
  if (r.src_device.is_cuda() && r.dst_device.is_cuda() && r.src_device != r.dst_device) {
    return CudaStatus(cudaMemcpyPeerAsync(r.dst, r.dst_device.index(), r.src,
                                          r.src_device.index(), r.bytes, stream),
                      "cudaMemcpyPeerAsync");
  }
  const cudaMemcpyKind kind =
      r.src_device.is_cpu()
          ? (r.dst_device.is_cpu() ? cudaMemcpyHostToHost : cudaMemcpyHostToDevice)
          : (r.dst_device.is_cpu() ? cudaMemcpyDeviceToHost : cudaMemcpyDeviceToDevice);
  return CudaStatus(cudaMemcpyAsync(r.dst, r.src, r.bytes, kind, stream), "cudaMemcpyAsync");
}

// --- The benchmarks, each for a batch; registered by name in main. ---

// Baseline: one cudaMemcpyAsync (cudaMemcpyPeerAsync) per request.
void BM_CudaMemcpyAsyncLoop(benchmark::State& state, Batch batch) {
  Buffers& b = Get();
  const std::vector<CopyRequest>& requests = b.Requests(batch);
  TimeOnStream(state, TotalBytes(requests), [&] {
    for (const CopyRequest& r : requests) {
      if (absl::Status status = QueueCopy(r, b.stream); !status.ok()) return status;
    }
    return absl::OkStatus();
  });
}

// Baseline: one cudaMemcpyBatchAsync for the whole batch, in stream order.
void BM_CudaMemcpyBatchAsync(benchmark::State& state, Batch batch) {
  Buffers& b = Get();
  const std::vector<CopyRequest>& requests = b.Requests(batch);
  std::vector<void*> dsts;
  std::vector<const void*> srcs;
  std::vector<size_t> sizes;
  for (const CopyRequest& r : requests) {
    dsts.push_back(r.dst);
    srcs.push_back(r.src);
    sizes.push_back(r.bytes);
  }
  cudaMemcpyAttributes attributes{};
  attributes.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  size_t attribute_index = 0;
  TimeOnStream(state, TotalBytes(requests), [&] {
    return CudaStatus(cudaMemcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(),
                                           requests.size(), &attributes, &attribute_index,
                                           /*numAttrs=*/1, b.stream),
                      "cudaMemcpyBatchAsync");
  });
}

// The batch copier: Execute of a plan made once, or CopyAsync (planning every time).
void BM_BatchCopier(benchmark::State& state, Batch batch, CopierKind kind,
                    bool with_planning) {
  Buffers& b = Get();
  const std::vector<CopyRequest>& requests = b.Requests(batch);
  absl::StatusOr<BatchCopier*> copier = b.Copier(kind);
  if (!copier.ok()) {
    Skip(state, copier.status());
    return;
  }
  absl::StatusOr<BatchPlan> plan = (*copier)->Plan(requests);
  if (!plan.ok()) {
    Skip(state, plan.status());
    return;
  }
  TimeOnStream(state, TotalBytes(requests), [&] {
    return with_planning
               ? (*copier)->CopyAsync(requests, Device::Cuda(0), b.stream)
               : (*copier)->Execute(*plan, requests, Device::Cuda(0), b.stream,
                                    /*synchronize=*/false);
  });
}

// Baseline: the plain fused copy kernel, one block of 256 threads per copy, its
// descriptors in device memory uploaded once (no per-call preparation at all).
void BM_PlainFusedKernel(benchmark::State& state, Batch batch) {
  Buffers& b = Get();
  const std::vector<CopyRequest>& requests = b.Requests(batch);
  const bench::PlainCopy* descriptors = b.DeviceDescriptors(batch);
  const int count = static_cast<int>(requests.size());
  TimeOnStream(state, TotalBytes(requests), [&] {
    return CudaStatus(bench::LaunchPlainFusedCopy(descriptors, count, b.stream),
                      "LaunchPlainFusedCopy");
  });
}

// What a launch costs by the size of its parameters (an empty kernel, one block).
void BM_EmptyKernel(benchmark::State& state, int param_bytes) {
  Buffers& b = Get();
  TimeOnStream(state, 0, [&] {
    return CudaStatus(bench::LaunchEmptyWithParams(param_bytes, b.stream),
                      "LaunchEmptyWithParams");
  });
}

// Planning alone, on this machine's host.
void BM_PlanOnly(benchmark::State& state, Batch batch) {
  Buffers& b = Get();
  const std::vector<CopyRequest>& requests = b.Requests(batch);
  absl::StatusOr<BatchCopier*> copier = b.Copier(CopierKind::kDefault);
  if (!copier.ok()) {
    Skip(state, copier.status());
    return;
  }
  TimeOnHost(state, TotalBytes(requests), [&] {
    absl::StatusOr<BatchPlan> plan = (*copier)->Plan(requests);
    benchmark::DoNotOptimize(plan);
    return plan.status();
  });
}

// genesis::transfer::CopyBytesAsync of a batch's single request.
void BM_CopyBytesAsync(benchmark::State& state, Batch batch) {
  Buffers& b = Get();
  const CopyRequest& r = b.Requests(batch).front();
  TimeOnStream(state, r.bytes, [&] {
    return CopyBytesAsync(r.dst, r.dst_device, r.src, r.src_device, r.bytes, b.stream);
  });
}

// Baseline for the mixed batch: one cudaMemcpyAsync of its total bytes.
void BM_OneCudaMemcpyAsync(benchmark::State& state, Batch batch) {
  Buffers& b = Get();
  const std::vector<CopyRequest>& requests = b.Requests(batch);
  const size_t total = TotalBytes(requests);
  void* dst = requests.front().dst;
  const void* src = requests.front().src;
  TimeOnStream(state, total, [&] {
    return CudaStatus(cudaMemcpyAsync(dst, src, total, cudaMemcpyDeviceToDevice, b.stream),
                      "cudaMemcpyAsync");
  });
}

// Hand-written best case for both directions at once: request 0 on the stream and
// request 1 on a second stream, which starts after the stream's earlier work; the stream
// continues after the second stream's copy.
void BM_TwoStreamsCudaMemcpyAsync(benchmark::State& state, Batch batch) {
  Buffers& b = Get();
  const std::vector<CopyRequest>& requests = b.Requests(batch);
  TimeOnStream(state, TotalBytes(requests), [&] {
    absl::Status status = CudaStatus(cudaEventRecord(b.fork, b.stream), "cudaEventRecord");
    if (status.ok()) {
      status = CudaStatus(cudaStreamWaitEvent(b.second_stream, b.fork, 0),
                          "cudaStreamWaitEvent");
    }
    if (status.ok()) status = QueueCopy(requests[0], b.stream);
    if (status.ok()) status = QueueCopy(requests[1], b.second_stream);
    if (status.ok()) {
      status = CudaStatus(cudaEventRecord(b.join, b.second_stream), "cudaEventRecord");
    }
    if (status.ok()) {
      status = CudaStatus(cudaStreamWaitEvent(b.stream, b.join, 0), "cudaStreamWaitEvent");
    }
    return status;
  });
}

// Pageable memory: synchronous cudaMemcpy (then the legacy stream's sync, since a
// pageable host-to-device cudaMemcpy may return before its DMA ends), against
// genesis::transfer::CopyBytes (the staging pipeline for pageable copies >= 1 MiB).
void BM_PageableCudaMemcpy(benchmark::State& state, bool to_device) {
  Buffers& b = Get();
  TimeOnHost(state, kLarge, [&] {
    const cudaError_t err =
        to_device
            ? cudaMemcpy(b.device_dst, b.pageable.data(), kLarge, cudaMemcpyHostToDevice)
            : cudaMemcpy(b.pageable.data(), b.device_src, kLarge, cudaMemcpyDeviceToHost);
    absl::Status status = CudaStatus(err, "cudaMemcpy");
    if (status.ok()) {
      status = CudaStatus(cudaStreamSynchronize(nullptr), "cudaStreamSynchronize");
    }
    return status;
  });
}

void BM_PageableCopyBytes(benchmark::State& state, bool to_device) {
  Buffers& b = Get();
  TimeOnHost(state, kLarge, [&] {
    return to_device ? CopyBytes(b.device_dst, Device::Cuda(0), b.pageable.data(),
                                 Device::Cpu(), kLarge, b.stream)
                     : CopyBytes(b.pageable.data(), Device::Cpu(), b.device_src,
                                 Device::Cuda(0), kLarge, b.stream);
  });
}

// Prints the plan of every batch the copier rows run, with the copier they run it with.
void PrintPlans() {
  struct Shown {
    const char* name;
    Batch batch;
    CopierKind copier;
  };
  const Shown shown[] = {
      {"D2D 1024 x 16 KiB", Batch::kD2D16KiB, CopierKind::kDefault},
      {"D2D 1024 x 256 KiB", Batch::kD2D256KiB, CopierKind::kDefault},
      {"D2D mixed 1024", Batch::kD2DMixed, CopierKind::kDefault},
      {"D2D mixed 1024, fused_max_bytes = 4 MiB", Batch::kD2DMixed, CopierKind::kAllFused},
      {"H2D pinned 1024 x 16 KiB", Batch::kH2DPinned16KiB, CopierKind::kDefault},
      {"H2D pinned 256 MiB", Batch::kH2DPinned256MiB, CopierKind::kDefault},
      {"D2H pinned 256 MiB", Batch::kD2HPinned256MiB, CopierKind::kDefault},
      {"H2D + D2H pinned 256 MiB", Batch::kBothPinned256MiB, CopierKind::kDefault},
      {"peer 256 MiB", Batch::kPeer256MiB, CopierKind::kDefault},
      {"peer 256 MiB, disable_peer_access", Batch::kPeer256MiB, CopierKind::kNoPeer},
      {"peer 1024 x 64 KiB", Batch::kPeer64KiB, CopierKind::kDefault},
      {"peer 1024 x 64 KiB, pulling", Batch::kPeer64KiB, CopierKind::kPeerPull},
  };
  Buffers& b = Get();
  for (const Shown& s : shown) {
    const std::vector<CopyRequest>& requests = b.Requests(s.batch);
    if (requests.empty()) continue;  // Peer batches with one GPU.
    absl::StatusOr<BatchCopier*> copier = b.Copier(s.copier);
    if (!copier.ok()) {
      std::fprintf(stderr, "%s\n", copier.status().ToString().c_str());
      std::exit(1);
    }
    absl::StatusOr<BatchPlan> plan = (*copier)->Plan(requests);
    std::fprintf(stderr, "=== %s ===\n%s\n", s.name,
                 plan.ok() ? plan->ToString().c_str() : plan.status().ToString().c_str());
  }
}

// Registers a benchmark with manual time in `unit`.
template <typename Fn, typename... Args>
void Register(const char* name, benchmark::TimeUnit unit, Fn fn, Args... args) {
  benchmark::RegisterBenchmark(name, [=](benchmark::State& state) { fn(state, args...); })
      ->UseManualTime()
      ->Unit(unit);
}

void RegisterAll(int device_count) {
  constexpr benchmark::TimeUnit kUs = benchmark::kMicrosecond;
  constexpr benchmark::TimeUnit kMs = benchmark::kMillisecond;
  constexpr CopierKind kDefault = CopierKind::kDefault;

  // 1. 1,024 x 16 KiB within cuda:0.
  Register("BM_D2D_1024x16KiB_CudaMemcpyAsyncLoop", kUs, BM_CudaMemcpyAsyncLoop,
           Batch::kD2D16KiB);
  Register("BM_D2D_1024x16KiB_CudaMemcpyBatchAsync", kUs, BM_CudaMemcpyBatchAsync,
           Batch::kD2D16KiB);
  Register("BM_D2D_1024x16KiB_BatchCopier", kUs, BM_BatchCopier, Batch::kD2D16KiB,
           kDefault, false);
  Register("BM_D2D_1024x16KiB_BatchCopier_WithPlanning", kUs, BM_BatchCopier,
           Batch::kD2D16KiB, kDefault, true);
  Register("BM_D2D_1024x16KiB_PlainFusedKernel", kUs, BM_PlainFusedKernel, Batch::kD2D16KiB);
  Register("BM_D2D_1024x16KiB_PlanOnly", kUs, BM_PlanOnly, Batch::kD2D16KiB);

  // 1b. The same with the sources in a shuffled order (no stride to exploit).
  Register("BM_D2D_1024x16KiB_Scattered_BatchCopier", kUs, BM_BatchCopier,
           Batch::kD2D16KiBScattered, kDefault, false);
  Register("BM_D2D_1024x16KiB_Scattered_BatchCopier_WithPlanning", kUs, BM_BatchCopier,
           Batch::kD2D16KiBScattered, kDefault, true);
  Register("BM_D2D_1024x16KiB_Scattered_PlainFusedKernel", kUs, BM_PlainFusedKernel,
           Batch::kD2D16KiBScattered);

  // 1c. Launches by the size of their parameters.
  for (const auto& [name, bytes] :
       {std::pair{"BM_Launch_EmptyKernel_64BParams", 64},
        std::pair{"BM_Launch_EmptyKernel_4KiBParams", 4096},
        std::pair{"BM_Launch_EmptyKernel_8KiBParams", 8192},
        std::pair{"BM_Launch_EmptyKernel_16KiBParams", 16384},
        std::pair{"BM_Launch_EmptyKernel_28KiBParams", 28672}}) {
    Register(name, kUs, BM_EmptyKernel, bytes);
  }

  // 2. 1,024 x 256 KiB within cuda:0.
  Register("BM_D2D_1024x256KiB_CudaMemcpyAsyncLoop", kUs, BM_CudaMemcpyAsyncLoop,
           Batch::kD2D256KiB);
  Register("BM_D2D_1024x256KiB_CudaMemcpyBatchAsync", kUs, BM_CudaMemcpyBatchAsync,
           Batch::kD2D256KiB);
  Register("BM_D2D_1024x256KiB_BatchCopier", kUs, BM_BatchCopier, Batch::kD2D256KiB,
           kDefault, false);

  // 3. 1,024 mixed sizes within cuda:0, and one copy of their total.
  Register("BM_D2D_Mixed1024_CudaMemcpyAsyncLoop", kUs, BM_CudaMemcpyAsyncLoop,
           Batch::kD2DMixed);
  Register("BM_D2D_Mixed1024_BatchCopier", kUs, BM_BatchCopier, Batch::kD2DMixed, kDefault,
           false);
  Register("BM_D2D_Mixed1024_BatchCopier_AllFused", kUs, BM_BatchCopier, Batch::kD2DMixed,
           CopierKind::kAllFused, false);
  Register("BM_D2D_Mixed1024_OneCudaMemcpyAsync", kUs, BM_OneCudaMemcpyAsync,
           Batch::kD2DMixed);

  // 4. 1,024 x 16 KiB from pinned host memory to cuda:0.
  Register("BM_H2D_Pinned1024x16KiB_CudaMemcpyAsyncLoop", kUs, BM_CudaMemcpyAsyncLoop,
           Batch::kH2DPinned16KiB);
  Register("BM_H2D_Pinned1024x16KiB_CudaMemcpyBatchAsync", kUs, BM_CudaMemcpyBatchAsync,
           Batch::kH2DPinned16KiB);
  Register("BM_H2D_Pinned1024x16KiB_BatchCopier", kUs, BM_BatchCopier,
           Batch::kH2DPinned16KiB, kDefault, false);

  // 5. 256 MiB between pinned host memory and cuda:0.
  Register("BM_H2D_Pinned256MiB_CudaMemcpyAsync", kMs, BM_CudaMemcpyAsyncLoop,
           Batch::kH2DPinned256MiB);
  Register("BM_H2D_Pinned256MiB_BatchCopier", kMs, BM_BatchCopier, Batch::kH2DPinned256MiB,
           kDefault, false);
  Register("BM_H2D_Pinned256MiB_CopyBytesAsync", kMs, BM_CopyBytesAsync,
           Batch::kH2DPinned256MiB);
  Register("BM_D2H_Pinned256MiB_CudaMemcpyAsync", kMs, BM_CudaMemcpyAsyncLoop,
           Batch::kD2HPinned256MiB);
  Register("BM_D2H_Pinned256MiB_BatchCopier", kMs, BM_BatchCopier, Batch::kD2HPinned256MiB,
           kDefault, false);
  Register("BM_D2H_Pinned256MiB_CopyBytesAsync", kMs, BM_CopyBytesAsync,
           Batch::kD2HPinned256MiB);

  // 6. Both directions at once, 256 MiB each (bytes count both), against one alone.
  Register("BM_Bidir_Pinned256MiB_H2DOnly_CudaMemcpyAsync", kMs, BM_CudaMemcpyAsyncLoop,
           Batch::kH2DPinned256MiB);
  Register("BM_Bidir_Pinned256MiB_BatchCopier", kMs, BM_BatchCopier,
           Batch::kBothPinned256MiB, kDefault, false);
  Register("BM_Bidir_Pinned256MiB_TwoStreamsCudaMemcpyAsync", kMs,
           BM_TwoStreamsCudaMemcpyAsync, Batch::kBothPinned256MiB);

  // 7. 256 MiB between pageable host memory and cuda:0 (synchronous).
  Register("BM_H2D_Pageable256MiB_CudaMemcpy", kMs, BM_PageableCudaMemcpy, true);
  Register("BM_H2D_Pageable256MiB_CopyBytes", kMs, BM_PageableCopyBytes, true);
  Register("BM_D2H_Pageable256MiB_CudaMemcpy", kMs, BM_PageableCudaMemcpy, false);
  Register("BM_D2H_Pageable256MiB_CopyBytes", kMs, BM_PageableCopyBytes, false);

  // 8. cuda:0 to cuda:1.
  if (device_count < 2) {
    std::fprintf(stderr, "one GPU: the peer rows are not run\n");
    return;
  }
  Register("BM_Peer_256MiB_CudaMemcpyPeerAsync", kMs, BM_CudaMemcpyAsyncLoop,
           Batch::kPeer256MiB);
  Register("BM_Peer_256MiB_BatchCopier", kMs, BM_BatchCopier, Batch::kPeer256MiB, kDefault,
           false);
  Register("BM_Peer_256MiB_BatchCopier_Staged", kMs, BM_BatchCopier, Batch::kPeer256MiB,
           CopierKind::kNoPeer, false);
  Register("BM_Peer_1024x64KiB_CudaMemcpyPeerAsyncLoop", kUs, BM_CudaMemcpyAsyncLoop,
           Batch::kPeer64KiB);
  Register("BM_Peer_1024x64KiB_BatchCopier", kUs, BM_BatchCopier, Batch::kPeer64KiB,
           kDefault, false);
  Register("BM_Peer_1024x64KiB_BatchCopier_Pull", kUs, BM_BatchCopier, Batch::kPeer64KiB,
           CopierKind::kPeerPull, false);
  Register("BM_Peer_1024x64KiB_BatchCopier_WithPlanning", kUs, BM_BatchCopier,
           Batch::kPeer64KiB, kDefault, true);
  // Sources shuffled: no two copies continue one another, so the fused kernel moves
  // them all (adjacent_runs.h).
  Register("BM_Peer_1024x64KiB_Scattered_BatchCopier", kUs, BM_BatchCopier,
           Batch::kPeer64KiBScattered, kDefault, false);
  Register("BM_Peer_1024x64KiB_Scattered_BatchCopier_Pull", kUs, BM_BatchCopier,
           Batch::kPeer64KiBScattered, CopierKind::kPeerPull, false);
}

}  // namespace
}  // namespace genesis::transfer

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  genesis::transfer::PrintPlans();
  genesis::transfer::RegisterAll(genesis::transfer::Get().device_count);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
