// For the benchmarks of expandable-segment memory: cuda:0's CudaVirtualMemory, or null
// with the benchmark skipped and the reason given (no CUDA device, no virtual memory
// management).
#ifndef GENESIS_BENCHMARKS_MEMORY_CUDA_VIRTUAL_MEMORY_OR_SKIP_H_
#define GENESIS_BENCHMARKS_MEMORY_CUDA_VIRTUAL_MEMORY_OR_SKIP_H_

#include <memory>
#include <string>

#include "benchmark/benchmark.h"
#include "genesis/cuda/device_query.h"
#include "genesis/memory/cuda_virtual_memory.h"

namespace genesis::memory {

inline std::unique_ptr<CudaVirtualMemory> CudaVirtualMemoryOrSkip(benchmark::State& state) {
  if (cuda::DeviceCount() == 0) {
    state.SkipWithError("no CUDA device");
    return nullptr;
  }
  absl::StatusOr<std::unique_ptr<CudaVirtualMemory>> vm = CudaVirtualMemory::Create(0);
  if (!vm.ok()) {
    state.SkipWithError(std::string(vm.status().message()).c_str());
    return nullptr;
  }
  return *std::move(vm);
}

}  // namespace genesis::memory

#endif  // GENESIS_BENCHMARKS_MEMORY_CUDA_VIRTUAL_MEMORY_OR_SKIP_H_
