// Kernels for the batch copy benchmark (batch_copy_cuda_benchmark.cc): the plain fused
// copy the batch copier is measured against, and what it takes to time device work
// without the host's part in it.
//
//  * LaunchPlainFusedCopy: one thread block per copy, its descriptor read from an array
//    already in device memory (uploaded once, outside the timing): the kernel alone,
//    with nothing of a per-call launch's preparation.
//  * LaunchHold: a one-thread kernel that waits until the host sets a flag (or a time
//    limit passes), so that operations queued behind it run back to back on the device
//    however long the host took to queue them.
//  * LaunchEmptyWithParams: an empty kernel with a given size of parameters, to see what
//    large launch parameters cost the host and the device.
//
// Plain C++ header; the kernels are in fused_copy_baselines.cu.
#ifndef GENESIS_BENCHMARKS_TRANSFER_FUSED_COPY_BASELINES_H_
#define GENESIS_BENCHMARKS_TRANSFER_FUSED_COPY_BASELINES_H_

#include <cuda_runtime_api.h>

#include <cstddef>

namespace genesis::transfer::bench {

struct PlainCopy {
  const void* src = nullptr;
  void* dst = nullptr;
  size_t bytes = 0;
};

// Copies `count` descriptors at `device_copies` (device memory): block i copies copy i
// with 256 threads, four 16-byte loads in flight per thread (every address and size a
// multiple of 16 here).
cudaError_t LaunchPlainFusedCopy(const PlainCopy* device_copies, int count,
                                 cudaStream_t stream);

// Waits (one thread) until *flag != 0 or about `max_ms` milliseconds have passed.
cudaError_t LaunchHold(const volatile int* flag, int max_ms, cudaStream_t stream);

// An empty kernel with `param_bytes` of parameters: 64, 4096, 8192, 16384 or 28672.
cudaError_t LaunchEmptyWithParams(int param_bytes, cudaStream_t stream);

}  // namespace genesis::transfer::bench

#endif  // GENESIS_BENCHMARKS_TRANSFER_FUSED_COPY_BASELINES_H_
