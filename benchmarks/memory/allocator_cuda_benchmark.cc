// Cached allocate+free pairs on a GPU: genesis's device pool beside cudaMalloc/cudaFree
// and cudaMallocAsync/cudaFreeAsync (CUDA's stream-ordered pool, release threshold set
// to keep everything cached, its best case), and the pinned pool beside
// cudaHostAlloc/cudaFreeHost, in one run on device 0.
//   tools/gpu_bundle.sh, then on the GPU machine:
//   gpu_bundle/benchmarks/benchmarks_memory_allocator_cuda_benchmark
// BM_ProfiledDevicePool: the device pool's pairs with the memory profiler off, on, and
// on with call stacks (profiled_pairs.h).
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "benchmark/benchmark.h"
#include "benchmarks/memory/pool_pairs.h"
#include "benchmarks/memory/profiled_pairs.h"
#include "genesis/cuda/device_query.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/cuda_backend.h"
#include "genesis/memory/cuda_stream_events.h"
#include "genesis/memory/pinned_backend.h"

namespace genesis::memory {
namespace {

CachingAllocator& DevicePool() {
  static CachingAllocator* pool =
      CachingAllocator::Create(CudaDeviceBackend::Create(0).value(), AllocatorOptions{},
                               CudaStreamEvents::Create(0).value())
          .value()
          .release();
  return *pool;
}

CachingAllocator& PinnedPool() {
  static CachingAllocator* pool =
      CachingAllocator::Create(PinnedHostBackend::Create(PinnedMode::kAlloc).value(),
                               AllocatorOptions{})
          .value()
          .release();
  return *pool;
}

// One stream per benchmark thread, created outside the timed loop.
cudaStream_t ThreadStream() {
  thread_local cudaStream_t stream = [] {
    cudaStream_t s = nullptr;
    cudaSetDevice(0);
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    return s;
  }();
  return stream;
}

bool NeedsGpu(benchmark::State& state) {
  if (cuda::DeviceCount() > 0) return true;
  state.SkipWithError("no CUDA device");
  return false;
}

void BM_DevicePool(benchmark::State& state) {
  if (!NeedsGpu(state)) return;
  RunCachedPairs(state, DevicePool(), reinterpret_cast<StreamId>(ThreadStream()));
}

void BM_ProfiledDevicePool(benchmark::State& state) {
  if (!NeedsGpu(state)) return;
  RunProfiledPairs(state, DevicePool(), reinterpret_cast<StreamId>(ThreadStream()));
}

void BM_CudaMalloc(benchmark::State& state) {
  if (!NeedsGpu(state)) return;
  cudaSetDevice(0);
  const size_t bytes = state.range(0);
  for (auto _ : state) {
    void* p = nullptr;
    if (cudaMalloc(&p, bytes) != cudaSuccess) state.SkipWithError("cudaMalloc failed");
    benchmark::DoNotOptimize(p);
    cudaFree(p);
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_CudaMallocAsync(benchmark::State& state) {
  if (!NeedsGpu(state)) return;
  cudaStream_t stream = ThreadStream();
  if (state.thread_index() == 0) {
    cudaMemPool_t pool;
    cudaDeviceGetDefaultMemPool(&pool, 0);
    uint64_t keep_all = UINT64_MAX;
    cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all);
  }
  const size_t bytes = state.range(0);
  for (auto _ : state) {
    void* p = nullptr;
    if (cudaMallocAsync(&p, bytes, stream) != cudaSuccess) {
      state.SkipWithError("cudaMallocAsync failed");
    }
    benchmark::DoNotOptimize(p);
    cudaFreeAsync(p, stream);
  }
  cudaStreamSynchronize(stream);
  state.SetItemsProcessed(state.iterations());
}

void BM_PinnedPool(benchmark::State& state) {
  if (!NeedsGpu(state)) return;
  RunCachedPairs(state, PinnedPool());
}

void BM_CudaHostAlloc(benchmark::State& state) {
  if (!NeedsGpu(state)) return;
  const size_t bytes = state.range(0);
  for (auto _ : state) {
    void* p = nullptr;
    if (cudaHostAlloc(&p, bytes, cudaHostAllocPortable) != cudaSuccess) {
      state.SkipWithError("cudaHostAlloc failed");
    }
    benchmark::DoNotOptimize(p);
    cudaFreeHost(p);
  }
  state.SetItemsProcessed(state.iterations());
}

#define GENESIS_PAIR_ARGS                                                      \
  Arg(512)->Arg(64 << 10)->Arg(1 << 20)->Arg(32 << 20)->Threads(1)->Threads(4) \
      ->Threads(16)->UseRealTime()

BENCHMARK(BM_DevicePool)->GENESIS_PAIR_ARGS;
BENCHMARK(BM_CudaMallocAsync)->GENESIS_PAIR_ARGS;
BENCHMARK(BM_ProfiledDevicePool)->GENESIS_PROFILED_PAIR_ARGS;
BENCHMARK(BM_CudaMalloc)->Arg(512)->Arg(1 << 20)->Arg(32 << 20)->UseRealTime();
BENCHMARK(BM_PinnedPool)->Arg(64 << 20)->Threads(1)->Threads(4)->UseRealTime();
BENCHMARK(BM_CudaHostAlloc)->Arg(64 << 20)->Iterations(20)->UseRealTime();

}  // namespace
}  // namespace genesis::memory

int main(int argc, char** argv) { return genesis::memory::PoolBenchmarkMain(argc, argv); }
