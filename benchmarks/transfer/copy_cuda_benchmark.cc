// Copies by path and size on cuda:0, each beside the plain CUDA call in the same run:
// genesis::transfer::CopyBytesAsync against cudaMemcpyAsync for pinned host to device,
// device to pinned host and device to device; genesis::transfer::CopyBytes against
// cudaMemcpy (then a synchronisation) for pageable host memory. Sizes 4 KiB .. 256 MiB.
//   gpu_bundle/benchmarks/benchmarks_transfer_copy_cuda_benchmark
// Timing (manual time): asynchronous rows queue kRuns copies between two events on a
// non-blocking stream and report the events' elapsed time; pageable rows are synchronous
// and timed on the host, one copy per iteration. bytes_per_second counts the bytes one
// copy moves, once. `genesis bench` plots bandwidth against size from these rows.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "benchmark/benchmark.h"
#include "genesis/core/device.h"
#include "genesis/transfer/copy.h"

namespace genesis::transfer {
namespace {

constexpr size_t kMax = size_t{256} << 20;
constexpr int kRuns = 10;

struct Buffers {
  bool ok = false;
  std::string error;
  void* pinned = nullptr;
  void* device_src = nullptr;
  void* device_dst = nullptr;
  std::vector<char> pageable;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;

  Buffers() {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
      error = "no CUDA device";
      return;
    }
    cudaSetDevice(0);
    if (cudaHostAlloc(&pinned, kMax, cudaHostAllocPortable) != cudaSuccess ||
        cudaMalloc(&device_src, kMax) != cudaSuccess ||
        cudaMalloc(&device_dst, kMax) != cudaSuccess ||
        cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess ||
        cudaEventCreate(&start) != cudaSuccess || cudaEventCreate(&stop) != cudaSuccess) {
      error = std::string("setup failed: ") + cudaGetErrorName(cudaGetLastError());
      return;
    }
    pageable.assign(kMax, 1);
    std::memset(pinned, 2, kMax);
    cudaMemset(device_src, 3, kMax);
    cudaMemset(device_dst, 4, kMax);
    cudaDeviceSynchronize();
    ok = true;
  }
};

Buffers& Get() {
  static Buffers* b = new Buffers();
  return *b;
}

enum class Path { kH2DPinned, kD2HPinned, kD2D, kH2DPageable, kD2HPageable };

// One copy of `n` bytes on `path`, by genesis or by CUDA.
absl::Status CopyOnce(Path path, bool genesis, size_t n) {
  Buffers& b = Get();
  const Device gpu = Device::Cuda(0), cpu = Device::Cpu();
  auto cuda = [](cudaError_t e) {
    return e == cudaSuccess ? absl::OkStatus() : absl::InternalError(cudaGetErrorName(e));
  };
  switch (path) {
    case Path::kH2DPinned:
      return genesis ? CopyBytesAsync(b.device_dst, gpu, b.pinned, cpu, n, b.stream)
                     : cuda(cudaMemcpyAsync(b.device_dst, b.pinned, n, cudaMemcpyHostToDevice,
                                            b.stream));
    case Path::kD2HPinned:
      return genesis ? CopyBytesAsync(b.pinned, cpu, b.device_src, gpu, n, b.stream)
                     : cuda(cudaMemcpyAsync(b.pinned, b.device_src, n, cudaMemcpyDeviceToHost,
                                            b.stream));
    case Path::kD2D:
      return genesis ? CopyBytesAsync(b.device_dst, gpu, b.device_src, gpu, n, b.stream)
                     : cuda(cudaMemcpyAsync(b.device_dst, b.device_src, n,
                                            cudaMemcpyDeviceToDevice, b.stream));
    case Path::kH2DPageable:
      if (genesis) return CopyBytes(b.device_dst, gpu, b.pageable.data(), cpu, n, b.stream);
      if (absl::Status s = cuda(cudaMemcpy(b.device_dst, b.pageable.data(), n,
                                           cudaMemcpyHostToDevice));
          !s.ok()) {
        return s;
      }
      return cuda(cudaStreamSynchronize(nullptr));
    case Path::kD2HPageable:
      if (genesis) return CopyBytes(b.pageable.data(), cpu, b.device_src, gpu, n, b.stream);
      return cuda(cudaMemcpy(b.pageable.data(), b.device_src, n, cudaMemcpyDeviceToHost));
  }
  return absl::InternalError("unknown path");
}

void BM_Copy(benchmark::State& state, Path path, bool genesis) {
  Buffers& b = Get();
  if (!b.ok) {
    state.SkipWithError(b.error.c_str());
    return;
  }
  const size_t n = static_cast<size_t>(state.range(0));
  const bool async = path == Path::kH2DPinned || path == Path::kD2HPinned || path == Path::kD2D;
  if (absl::Status s = CopyOnce(path, genesis, n); !s.ok()) {  // Warm up.
    state.SkipWithError(s.ToString().c_str());
    return;
  }
  cudaStreamSynchronize(b.stream);
  for (auto _ : state) {
    absl::Status s;
    if (async) {
      cudaEventRecord(b.start, b.stream);
      for (int i = 0; i < kRuns && s.ok(); ++i) s = CopyOnce(path, genesis, n);
      cudaEventRecord(b.stop, b.stream);
      cudaEventSynchronize(b.stop);
      float ms = 0;
      cudaEventElapsedTime(&ms, b.start, b.stop);
      state.SetIterationTime(ms / 1e3);
    } else {
      const auto start = std::chrono::steady_clock::now();
      s = CopyOnce(path, genesis, n);
      state.SetIterationTime(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    if (!s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return;
    }
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(n) * (async ? kRuns : 1));
}

void RegisterAll() {
  struct Row {
    const char* name;
    Path path;
    bool genesis;
  };
  const Row rows[] = {
      {"BM_Copy_H2DPinned_CopyBytesAsync", Path::kH2DPinned, true},
      {"BM_Copy_H2DPinned_CudaMemcpyAsync", Path::kH2DPinned, false},
      {"BM_Copy_D2HPinned_CopyBytesAsync", Path::kD2HPinned, true},
      {"BM_Copy_D2HPinned_CudaMemcpyAsync", Path::kD2HPinned, false},
      {"BM_Copy_D2D_CopyBytesAsync", Path::kD2D, true},
      {"BM_Copy_D2D_CudaMemcpyAsync", Path::kD2D, false},
      {"BM_Copy_H2DPageable_CopyBytes", Path::kH2DPageable, true},
      {"BM_Copy_H2DPageable_CudaMemcpy", Path::kH2DPageable, false},
      {"BM_Copy_D2HPageable_CopyBytes", Path::kD2HPageable, true},
      {"BM_Copy_D2HPageable_CudaMemcpy", Path::kD2HPageable, false},
  };
  for (const Row& r : rows) {
    auto* b = benchmark::RegisterBenchmark(
        r.name, [r](benchmark::State& state) { BM_Copy(state, r.path, r.genesis); });
    for (int64_t bytes = 4 << 10; bytes <= static_cast<int64_t>(kMax); bytes *= 4) b->Arg(bytes);
    b->UseManualTime()->Unit(benchmark::kMicrosecond);
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
