// Cached allocate+free pairs: genesis's host pool beside malloc/free, in one run.
//   bazel run -c opt //benchmarks/memory:allocator_benchmark
// Each iteration allocates one block of the given size and frees it; after the first
// iteration every allocation is a cache hit. Threads share one pool.
// BM_ProfiledHostPool: the same pairs on a pool of their own with the memory profiler
// off, on, and on with call stacks (profiled_pairs.h).
#include <cstdlib>
#include <memory>

#include "benchmark/benchmark.h"
#include "genesis/memory/caching_allocator.h"
#include "benchmarks/memory/pool_pairs.h"
#include "benchmarks/memory/profiled_pairs.h"
#include "genesis/memory/host_backend.h"

namespace genesis::memory {
namespace {

CachingAllocator& HostPool() {
  static CachingAllocator* pool =
      CachingAllocator::Create(std::make_unique<HostBackend>(), AllocatorOptions{})
          .value()
          .release();
  return *pool;
}

void BM_HostPool(benchmark::State& state) { RunCachedPairs(state, HostPool()); }

void BM_ProfiledHostPool(benchmark::State& state) {
  static CachingAllocator* pool =
      CachingAllocator::Create(std::make_unique<HostBackend>(), AllocatorOptions{})
          .value()
          .release();
  RunProfiledPairs(state, *pool);
}

void BM_Malloc(benchmark::State& state) {
  const size_t bytes = state.range(0);
  for (auto _ : state) {
    void* const p = std::malloc(bytes);
    // Through the read-only overload: GCC 12 with -fsanitize=address,undefined passed a
    // corrupted pointer to free() after the read-write one ("+m,r").
    benchmark::DoNotOptimize(static_cast<const void*>(p));
    std::free(p);
  }
  state.SetItemsProcessed(state.iterations());
}

#define GENESIS_PAIR_ARGS                                                      \
  Arg(512)->Arg(64 << 10)->Arg(1 << 20)->Arg(32 << 20)->Threads(1)->Threads(4) \
      ->Threads(16)->UseRealTime()

BENCHMARK(BM_HostPool)->GENESIS_PAIR_ARGS;
BENCHMARK(BM_Malloc)->GENESIS_PAIR_ARGS;
BENCHMARK(BM_ProfiledHostPool)->GENESIS_PROFILED_PAIR_ARGS;

}  // namespace
}  // namespace genesis::memory

int main(int argc, char** argv) { return genesis::memory::PoolBenchmarkMain(argc, argv); }
