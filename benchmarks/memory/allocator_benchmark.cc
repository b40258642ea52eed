// Cached allocate+free pairs: genesis's host pool beside glibc's malloc/free and the
// malloc/free of mimalloc, jemalloc and tcmalloc (loaded at run time where their Debian
// packages are installed: foreign_allocators.h), in one run.
//   bazel run -c opt //benchmarks/memory:allocator_benchmark
// Each iteration allocates one block of the given size and frees it; after the first
// iteration every allocation is a cache hit. Threads share one pool. An allocator whose
// library is missing has its benchmarks fail with "unavailable: ...".
// BM_ProfiledHostPool: the same pairs on a pool of their own with the memory profiler
// off, on, and on with call stacks (profiled_pairs.h).
#include <cstdlib>
#include <memory>

#include "benchmark/benchmark.h"
#include "genesis/memory/caching_allocator.h"
#include "benchmarks/memory/foreign_allocators.h"
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

// Pairs of `allocate` and `release` (a malloc and its free).
template <typename Allocate, typename Release>
void RunMallocPairs(benchmark::State& state, Allocate allocate, Release release) {
  const size_t bytes = state.range(0);
  for (auto _ : state) {
    void* const p = allocate(bytes);
    // Through the read-only overload: GCC 12 with -fsanitize=address,undefined passed a
    // corrupted pointer to free() after the read-write one ("+m,r").
    benchmark::DoNotOptimize(static_cast<const void*>(p));
    release(p);
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_Malloc(benchmark::State& state) { RunMallocPairs(state, std::malloc, std::free); }

void RunForeign(benchmark::State& state, ForeignKind kind) {
  const ForeignAllocator& a = Foreign(kind);
  if (!a.ok()) {
    state.SkipWithError(a.error.c_str());
    return;
  }
  RunMallocPairs(state, a.malloc, a.free);
}

void BM_Mimalloc(benchmark::State& state) { RunForeign(state, ForeignKind::kMimalloc); }
void BM_Jemalloc(benchmark::State& state) { RunForeign(state, ForeignKind::kJemalloc); }
void BM_Tcmalloc(benchmark::State& state) { RunForeign(state, ForeignKind::kTcmalloc); }

#define GENESIS_PAIR_ARGS                                                      \
  Arg(8)->Arg(512)->Arg(64 << 10)->Arg(1 << 20)->Arg(32 << 20)->Arg(64 << 20)       \
      ->Threads(1)->Threads(4)->Threads(16)->UseRealTime()

BENCHMARK(BM_HostPool)->GENESIS_PAIR_ARGS;
BENCHMARK(BM_Malloc)->GENESIS_PAIR_ARGS;
BENCHMARK(BM_Mimalloc)->GENESIS_PAIR_ARGS;
BENCHMARK(BM_Jemalloc)->GENESIS_PAIR_ARGS;
BENCHMARK(BM_Tcmalloc)->GENESIS_PAIR_ARGS;
BENCHMARK(BM_ProfiledHostPool)->GENESIS_PROFILED_PAIR_ARGS;

}  // namespace
}  // namespace genesis::memory

// LeakSanitizer (asan builds): tcmalloc's start-up registers an extension object it never
// frees, and under asan its `new` is asan's, so it would be reported as this program's leak.
extern "C" const char* __lsan_default_suppressions() {
  return "leak:libtcmalloc_minimal.so\n";
}

int main(int argc, char** argv) {
  genesis::memory::ReexecWithStaticTlsRoom(argv);
  return genesis::memory::PoolBenchmarkMain(argc, argv);
}
