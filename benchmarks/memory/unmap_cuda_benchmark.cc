// What an unmap of expandable-segment memory costs the thread that asks for it while
// the device still has work queued: CudaVirtualMemory::Unmap hands the pieces to its
// own thread, which waits for the device and unmaps them. /waits adds FinishUnmaps to
// the timed part, which is what an unmap that synchronizes the device (as cudaFree and
// PyTorch's expandable segments do) costs that thread. The queued work is a host
// function on a stream that sleeps for the argument's microseconds (0: none).
//   tools/gpu_bundle.sh, then on the GPU machine:
//   gpu_bundle/benchmarks/benchmarks_memory_unmap_cuda_benchmark
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>

#include "benchmark/benchmark.h"
#include "benchmarks/memory/cuda_virtual_memory_or_skip.h"
#include "genesis/memory/cuda_virtual_memory.h"

namespace genesis::memory {
namespace {

void CUDART_CB Sleep(void* us) {
  std::this_thread::sleep_for(std::chrono::microseconds(reinterpret_cast<intptr_t>(us)));
}

void Unmap(benchmark::State& state, bool waits) {
  std::unique_ptr<CudaVirtualMemory> vm = CudaVirtualMemoryOrSkip(state);
  if (vm == nullptr) return;
  const size_t bytes = size_t{8} << 20;  // Four pieces of one chunk each.
  void* p = vm->Reserve(bytes).value();
  cudaStream_t stream = nullptr;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  const intptr_t queued_us = state.range(0);
  for (auto _ : state) {
    if (!vm->Map(p, bytes).ok()) {
      state.SkipWithError("Map failed");
      break;
    }
    if (queued_us > 0) {
      cudaLaunchHostFunc(stream, &Sleep, reinterpret_cast<void*>(queued_us));
    }
    const auto start = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(vm->Unmap(p, bytes));
    if (waits) benchmark::DoNotOptimize(vm->FinishUnmaps());
    state.SetIterationTime(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    cudaStreamSynchronize(stream);
    (void)vm->FinishUnmaps();
  }
  cudaStreamDestroy(stream);
  vm->Unreserve(p, bytes);
}

void BM_Unmap(benchmark::State& state) { Unmap(state, /*waits=*/false); }
void BM_UnmapAndWait(benchmark::State& state) { Unmap(state, /*waits=*/true); }

BENCHMARK(BM_Unmap)->Arg(0)->Arg(2000)->UseManualTime()->Iterations(200);
BENCHMARK(BM_UnmapAndWait)->Arg(0)->Arg(2000)->UseManualTime()->Iterations(200);

}  // namespace
}  // namespace genesis::memory

BENCHMARK_MAIN();
