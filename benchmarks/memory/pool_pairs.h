// The loop every pool benchmark times: allocate one block of state.range(0) bytes on
// `stream` and free it; a pair before the timed loop makes every timed allocation a cache
// hit.
#ifndef GENESIS_BENCHMARKS_MEMORY_POOL_PAIRS_H_
#define GENESIS_BENCHMARKS_MEMORY_POOL_PAIRS_H_

#include <cstddef>

#include "benchmark/benchmark.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/owner_lock.h"

namespace genesis::memory {

inline void RunCachedPairs(benchmark::State& state, CachingAllocator& pool,
                           StreamId stream = kNoStream) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  // Untimed: the first pair on this thread and stream may need new memory (a segment,
  // mapped chunks); every timed pair is then a cache hit.
  if (absl::StatusOr<void*> warm = pool.Allocate(bytes, stream); warm.ok()) {
    (void)pool.Free(*warm);
  }
  for (auto _ : state) {
    void* ptr;
    {  // As GENESIS_ASSIGN_OR_RETURN would: the StatusOr ends with its check.
      absl::StatusOr<void*> p = pool.Allocate(bytes, stream);
      if (!p.ok()) {
        state.SkipWithError("Allocate failed");
        break;
      }
      ptr = *p;
    }
    benchmark::DoNotOptimize(ptr);  // The pointer alone, as the malloc loops keep theirs.
    if (!pool.Free(ptr).ok()) state.SkipWithError("Free failed");
  }
  state.SetItemsProcessed(state.iterations());
}

// BENCHMARK_MAIN, which also says in the run's context how thread caches are locked:
// "membarrier" (no locked instruction on the owner's side) or "fenced".
inline int PoolBenchmarkMain(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  OwnerLock probe;
  benchmark::AddCustomContext("thread_cache_lock",
                              OwnerLock::OwnerSideIsPlain() ? "membarrier" : "fenced");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace genesis::memory

#endif  // GENESIS_BENCHMARKS_MEMORY_POOL_PAIRS_H_
