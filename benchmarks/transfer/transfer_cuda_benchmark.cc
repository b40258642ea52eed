// Pageable host memory to and from a GPU: the staging pipeline (genesis/transfer/
// staging.h with CudaStagingEngine) against cudaMemcpy from the same pageable buffer,
// and cudaMemcpyAsync from pinned memory, the figure the pipeline aims at, in one binary.
//
//   gpu_bundle/benchmarks/benchmarks_transfer_transfer_cuda_benchmark
//       --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// Each iteration moves 256 MiB once; bytes_per_second counts them once.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "benchmark/benchmark.h"
#include "genesis/transfer/cuda_staging_engine.h"
#include "genesis/transfer/staging.h"

namespace genesis::transfer {
namespace {

constexpr size_t kBytes = size_t{256} << 20;

// Device, pageable and pinned buffers of kBytes, made once, and pipelines made on first use.
struct Buffers {
  void* device = nullptr;
  std::vector<char> pageable = std::vector<char>(kBytes, 1);  // Touched: no first-touch cost.
  void* pinned = nullptr;
  // By (host threads, chunk KiB, buffers).
  std::map<std::tuple<int, int, int>, std::unique_ptr<StagingPipeline>> pipelines;

  Buffers() {
    if (cudaMalloc(&device, kBytes) != cudaSuccess ||
        cudaHostAlloc(&pinned, kBytes, cudaHostAllocDefault) != cudaSuccess) {
      std::fprintf(stderr, "no GPU memory\n");
      std::exit(1);
    }
    std::memset(pinned, 1, kBytes);
  }

  // The pipeline of a benchmark's arguments (PipelineArgs): `threads` host threads,
  // chunks of `chunk_kib` KiB and `buffers` staging buffers.
  StagingPipeline& Pipeline(const benchmark::State& state) {
    const int threads = state.range(0);
    const int chunk_kib = state.range(1);
    const int buffers = state.range(2);
    std::unique_ptr<StagingPipeline>& pipeline = pipelines[{threads, chunk_kib, buffers}];
    if (pipeline != nullptr) return *pipeline;
    StagingPipeline::Options options;
    options.num_threads = threads;
    options.chunk_bytes = size_t(chunk_kib) << 10;
    options.num_buffers = buffers;
    auto engine = CudaStagingEngine::Create(0, options.num_buffers);
    if (!engine.ok()) {
      std::fprintf(stderr, "%s\n", engine.status().ToString().c_str());
      std::exit(1);
    }
    auto made = StagingPipeline::Create(*std::move(engine), options);
    if (!made.ok()) {
      std::fprintf(stderr, "%s\n", made.status().ToString().c_str());
      std::exit(1);
    }
    pipeline = *std::move(made);
    return *pipeline;
  }
};

Buffers& Get() {
  static Buffers* buffers = new Buffers();
  return *buffers;
}

void Finish(benchmark::State& state) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * kBytes);
}

void BM_PageableToDevice_CudaMemcpy(benchmark::State& state) {
  Buffers& b = Get();
  for (auto _ : state) cudaMemcpy(b.device, b.pageable.data(), kBytes, cudaMemcpyHostToDevice);
  Finish(state);
}

void BM_PageableToDevice_StagingPipeline(benchmark::State& state) {
  Buffers& b = Get();
  for (auto _ : state) {
    if (!b.Pipeline(state).HostToDevice(b.device, b.pageable.data(), kBytes).ok()) {
      state.SkipWithError("pipeline failed");
    }
  }
  Finish(state);
}

void BM_DeviceToPageable_CudaMemcpy(benchmark::State& state) {
  Buffers& b = Get();
  for (auto _ : state) cudaMemcpy(b.pageable.data(), b.device, kBytes, cudaMemcpyDeviceToHost);
  Finish(state);
}

void BM_DeviceToPageable_StagingPipeline(benchmark::State& state) {
  Buffers& b = Get();
  for (auto _ : state) {
    if (!b.Pipeline(state).DeviceToHost(b.pageable.data(), b.device, kBytes).ok()) {
      state.SkipWithError("pipeline failed");
    }
  }
  Finish(state);
}

void BM_PinnedToDevice_CudaMemcpyAsync(benchmark::State& state) {
  Buffers& b = Get();
  for (auto _ : state) {
    cudaMemcpyAsync(b.device, b.pinned, kBytes, cudaMemcpyHostToDevice, nullptr);
    cudaStreamSynchronize(nullptr);
  }
  Finish(state);
}

void BM_DeviceToPinned_CudaMemcpyAsync(benchmark::State& state) {
  Buffers& b = Get();
  for (auto _ : state) {
    cudaMemcpyAsync(b.pinned, b.device, kBytes, cudaMemcpyDeviceToHost, nullptr);
    cudaStreamSynchronize(nullptr);
  }
  Finish(state);
}

// The pipeline's arguments: host threads copying to and from the staging buffers, chunk
// KiB, staging buffers. The defaults (StagingPipeline::Options) first, then the sweep
// that chose them.
void PipelineArgs(benchmark::internal::Benchmark* b) {
  const StagingPipeline::Options defaults;
  b->Args({defaults.num_threads, static_cast<int64_t>(defaults.chunk_bytes >> 10),
           defaults.num_buffers});
  for (int threads : {4, 8, 12}) b->Args({threads, 4096, 4});
  for (int chunk_kib : {1024, 2048, 8192}) {
    for (int buffers : {4, 8}) b->Args({8, chunk_kib, buffers});
  }
  b->Args({8, 4096, 8});
  b->ArgNames({"threads", "chunk_kib", "buffers"});
}

BENCHMARK(BM_PageableToDevice_CudaMemcpy)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PageableToDevice_StagingPipeline)
    ->Apply(PipelineArgs)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DeviceToPageable_CudaMemcpy)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DeviceToPageable_StagingPipeline)
    ->Apply(PipelineArgs)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PinnedToDevice_CudaMemcpyAsync)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DeviceToPinned_CudaMemcpyAsync)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace genesis::transfer

BENCHMARK_MAIN();
