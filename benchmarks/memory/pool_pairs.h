// The loop every pool benchmark times: allocate one block of state.range(0) bytes on
// `stream` and free it, so that after the first iteration each allocation is a cache hit.
#ifndef GENESIS_BENCHMARKS_MEMORY_POOL_PAIRS_H_
#define GENESIS_BENCHMARKS_MEMORY_POOL_PAIRS_H_

#include <cstddef>

#include "benchmark/benchmark.h"
#include "genesis/memory/caching_allocator.h"

namespace genesis::memory {

inline void RunCachedPairs(benchmark::State& state, CachingAllocator& pool,
                           StreamId stream = kNoStream) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  for (auto _ : state) {
    absl::StatusOr<void*> p = pool.Allocate(bytes, stream);
    if (!p.ok()) {
      state.SkipWithError("Allocate failed");
      break;
    }
    benchmark::DoNotOptimize(*p);
    if (!pool.Free(*p).ok()) state.SkipWithError("Free failed");
  }
  state.SetItemsProcessed(state.iterations());
}

}  // namespace genesis::memory

#endif  // GENESIS_BENCHMARKS_MEMORY_POOL_PAIRS_H_
