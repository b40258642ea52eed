// Kernels of copy_engine_benchmark: a copy through the SMs (to or from a peer GPU's
// memory, or within one GPU) and the addition of the zero-CTA all_reduce's shards. Plain
// C++ header; the kernels are in copy_engine_kernels.cu.
#ifndef GENESIS_BENCHMARKS_DISTRIBUTED_COPY_ENGINE_KERNELS_H_
#define GENESIS_BENCHMARKS_DISTRIBUTED_COPY_ENGINE_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstddef>

namespace genesis::benchmarks {

// Queues on `stream` a copy of `bytes` (a multiple of 16, both addresses on 16 bytes)
// from `src` to `dst` by `blocks` blocks of 512 threads, each thread moving 16 bytes at
// a time with four loads in flight.
cudaError_t LaunchSmCopy(const void* src, void* dst, size_t bytes, int blocks, cudaStream_t stream);

// Queues on `stream` out[i] = the sum over s < `shards` of in[s * count + i], for i <
// `count` floats (a multiple of 4, the arrays on 16 bytes), by `blocks` blocks of 512
// threads. `out` may be in[0 .. count).
cudaError_t LaunchAddShards(const float* in, float* out, size_t count, int shards, int blocks,
                            cudaStream_t stream);

}  // namespace genesis::benchmarks

#endif  // GENESIS_BENCHMARKS_DISTRIBUTED_COPY_ENGINE_KERNELS_H_
