// Cached allocate+free pairs with the memory profiler off, on, and on with call stacks,
// for the pool benchmarks: the profiler's cost per pair is the difference between the
// modes of one run. state.range(1) picks the mode:
//   0: no profiler; 1: recording (tick clock for fast-path events, the default);
//   2: recording with a steady_clock read per event; 3: as 1, with call stacks.
#ifndef GENESIS_BENCHMARKS_MEMORY_PROFILED_PAIRS_H_
#define GENESIS_BENCHMARKS_MEMORY_PROFILED_PAIRS_H_

#include <memory>

#include "benchmark/benchmark.h"
#include "benchmarks/memory/pool_pairs.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/profiler/recorder.h"

namespace genesis::memory {

inline void RunProfiledPairs(benchmark::State& state, CachingAllocator& pool,
                             StreamId stream = kNoStream) {
  static constexpr const char* kModes[] = {"profiler off", "profiler on",
                                           "profiler on, exact clock",
                                           "profiler on, stacks"};
  const int mode = static_cast<int>(state.range(1));
  std::unique_ptr<profiler::Recorder> recorder;
  if (mode > 0) {
    profiler::RecorderOptions options;
    options.fast_path_clock =
        mode == 2 ? profiler::FastPathClock::kExact : profiler::FastPathClock::kTick;
    options.stacks = mode == 3;
    auto created = profiler::Recorder::Create(options);
    if (!created.ok()) {
      state.SkipWithError(created.status().ToString().c_str());
      return;
    }
    recorder = std::move(*created);
    if (!recorder->Attach(&pool, "bench", "pool").ok()) {
      state.SkipWithError("Attach failed");
      return;
    }
  }
  state.SetLabel(kModes[mode]);
  RunCachedPairs(state, pool, stream);
  if (recorder != nullptr) {
    (void)recorder->Stop();
    state.counters["dropped"] = static_cast<double>(recorder->Collect().dropped_events);
  }
}

// Sizes from the small and the large pool, each mode.
#define GENESIS_PROFILED_PAIR_ARGS \
  ArgsProduct({{512, 1 << 20}, {0, 1, 2, 3}})->Threads(1)->UseRealTime()

}  // namespace genesis::memory

#endif  // GENESIS_BENCHMARKS_MEMORY_PROFILED_PAIRS_H_
