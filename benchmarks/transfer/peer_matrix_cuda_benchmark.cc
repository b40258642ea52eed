// The peer matrix: for every ordered pair of GPUs (from 1 to 8 or more, whatever the
// machine has), bandwidth of 256 MiB copies and latency of 4-byte copies through
// genesis::transfer::CopyBytesAsync, each beside cudaMemcpyPeerAsync in the same run.
// Peer access is enabled where the hardware allows it. With fewer than two GPUs it
// registers nothing and says so.
//   gpu_bundle/benchmarks/benchmarks_transfer_peer_matrix_cuda_benchmark
// Names: BM_PeerMatrix_<Bandwidth|Latency>_<CopyBytesAsync|CudaMemcpyPeerAsync>/from:i/to:j.
// Timing (manual time): bandwidth rows queue kRuns copies between two events on a
// non-blocking stream of the destination GPU (the stream CopyBytesAsync takes for GPU
// to GPU copies; the baseline uses the same stream); bytes_per_second counts the bytes
// copied, once. Latency rows time one copy and the stream's synchronisation on the host.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "genesis/core/device.h"
#include "genesis/transfer/copy.h"

namespace genesis::transfer {
namespace {

constexpr size_t kLarge = size_t{256} << 20;
constexpr size_t kSmall = 4;
constexpr int kRuns = 5;

struct PerGpu {
  void* src = nullptr;
  void* dst = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
};

struct Machine {
  int count = 0;
  std::string error;
  std::vector<PerGpu> gpus;

  Machine() {
    if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
    gpus.resize(count);
    for (int d = 0; d < count; ++d) {
      cudaSetDevice(d);
      PerGpu& g = gpus[d];
      if (cudaMalloc(&g.src, kLarge) != cudaSuccess || cudaMalloc(&g.dst, kLarge) != cudaSuccess ||
          cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking) != cudaSuccess ||
          cudaEventCreate(&g.start) != cudaSuccess || cudaEventCreate(&g.stop) != cudaSuccess) {
        error = absl::StrCat("setup on cuda:", d, " failed: ", cudaGetErrorName(cudaGetLastError()));
        return;
      }
      cudaMemset(g.src, d + 1, kLarge);
      for (int peer = 0; peer < count; ++peer) {
        int can = 0;
        if (peer != d && cudaDeviceCanAccessPeer(&can, d, peer) == cudaSuccess && can) {
          if (cudaDeviceEnablePeerAccess(peer, 0) != cudaSuccess) cudaGetLastError();
        }
      }
      cudaDeviceSynchronize();
    }
  }
};

Machine& Get() {
  static Machine* m = new Machine();
  return *m;
}

absl::Status Copy(int from, int to, size_t n, bool genesis) {
  Machine& m = Get();
  PerGpu& src = m.gpus[from];
  PerGpu& dst = m.gpus[to];
  if (genesis) {
    return CopyBytesAsync(dst.dst, Device::Cuda(to), src.src, Device::Cuda(from), n, dst.stream);
  }
  const cudaError_t e = cudaMemcpyPeerAsync(dst.dst, to, src.src, from, n, dst.stream);
  return e == cudaSuccess ? absl::OkStatus() : absl::InternalError(cudaGetErrorName(e));
}

void BM_Bandwidth(benchmark::State& state, int from, int to, bool genesis) {
  Machine& m = Get();
  if (!m.error.empty()) {
    state.SkipWithError(m.error.c_str());
    return;
  }
  PerGpu& dst = m.gpus[to];
  cudaSetDevice(to);
  if (absl::Status s = Copy(from, to, kLarge, genesis); !s.ok()) {
    state.SkipWithError(s.ToString().c_str());
    return;
  }
  cudaStreamSynchronize(dst.stream);
  for (auto _ : state) {
    absl::Status s;
    cudaSetDevice(to);
    cudaEventRecord(dst.start, dst.stream);
    for (int i = 0; i < kRuns && s.ok(); ++i) s = Copy(from, to, kLarge, genesis);
    cudaSetDevice(to);
    cudaEventRecord(dst.stop, dst.stream);
    cudaEventSynchronize(dst.stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, dst.start, dst.stop);
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return;
    }
    state.SetIterationTime(ms / 1e3);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(kLarge) * kRuns);
}

void BM_Latency(benchmark::State& state, int from, int to, bool genesis) {
  Machine& m = Get();
  if (!m.error.empty()) {
    state.SkipWithError(m.error.c_str());
    return;
  }
  PerGpu& dst = m.gpus[to];
  cudaSetDevice(to);
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    absl::Status s = Copy(from, to, kSmall, genesis);
    if (s.ok() && cudaStreamSynchronize(dst.stream) != cudaSuccess) {
      s = absl::InternalError(cudaGetErrorName(cudaGetLastError()));
    }
    state.SetIterationTime(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return;
    }
  }
}

void RegisterAll() {
  const int count = Get().count;
  if (count < 2) {
    std::fprintf(stderr, "peer matrix: %d GPU(s); it needs two or more, nothing to run\n", count);
    return;
  }
  for (int from = 0; from < count; ++from) {
    for (int to = 0; to < count; ++to) {
      if (from == to) continue;
      const std::string pair = absl::StrCat("/from:", from, "/to:", to);
      for (bool genesis : {true, false}) {
        const char* call = genesis ? "CopyBytesAsync" : "CudaMemcpyPeerAsync";
        benchmark::RegisterBenchmark(
            absl::StrCat("BM_PeerMatrix_Bandwidth_", call, pair).c_str(),
            [=](benchmark::State& state) { BM_Bandwidth(state, from, to, genesis); })
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
        benchmark::RegisterBenchmark(
            absl::StrCat("BM_PeerMatrix_Latency_", call, pair).c_str(),
            [=](benchmark::State& state) { BM_Latency(state, from, to, genesis); })
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
}

}  // namespace
}  // namespace genesis::transfer

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  genesis::transfer::RegisterAll();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
