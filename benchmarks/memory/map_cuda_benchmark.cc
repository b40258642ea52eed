// What mapping expandable-segment memory costs, by the size of its pieces: one Map of
// 512 MiB through CudaVirtualMemory (a cuMemCreate and cuMemMap per piece, one
// cuMemSetAccess for the range), timed alone; the unmap after it is not. The counter
// us_per_piece says whether the driver's time follows the number of pieces or the bytes.
//   tools/gpu_bundle.sh, then on the GPU machine:
//   gpu_bundle/benchmarks/benchmarks_memory_map_cuda_benchmark
#include <chrono>
#include <cstddef>
#include <memory>

#include "benchmark/benchmark.h"
#include "benchmarks/memory/cuda_virtual_memory_or_skip.h"
#include "genesis/memory/cuda_virtual_memory.h"
#include "genesis/memory/piece_layout.h"

namespace genesis::memory {
namespace {

void BM_Map512MiB(benchmark::State& state) {
  std::unique_ptr<CudaVirtualMemory> vm = CudaVirtualMemoryOrSkip(state);
  if (vm == nullptr) return;
  const size_t bytes = size_t{512} << 20;
  const size_t piece = static_cast<size_t>(state.range(0)) << 20;
  const PieceCut cut{/*max_piece=*/piece, /*min_piece=*/0, PieceLayout::kAligned};
  void* p = vm->Reserve(bytes).value();
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    if (!vm->MapPieces(p, bytes, cut).ok()) {
      state.SkipWithError("MapPieces failed");
      break;
    }
    state.SetIterationTime(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    (void)vm->Unmap(p, bytes);
    (void)vm->FinishUnmaps();
  }
  const double pieces = static_cast<double>(bytes / piece);
  state.counters["pieces"] = pieces;
  state.counters["us_per_piece"] = benchmark::Counter(
      pieces * 1e-6, benchmark::Counter::kIsIterationInvariantRate |
                         benchmark::Counter::kInvert);
  vm->Unreserve(p, bytes);
}

BENCHMARK(BM_Map512MiB)->Arg(2)->Arg(8)->Arg(32)->Arg(128)->Arg(512)->UseManualTime()
    ->Iterations(20)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace genesis::memory

BENCHMARK_MAIN();
