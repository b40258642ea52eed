// The compute of a synthetic backward pass for the reducer benchmark: a kernel that
// keeps every SM of the GPU busy for a set time, standing for one layer's backward.
// Plain C++ header; the kernel is in synthetic_backward.cu.
#ifndef GENESIS_BENCHMARKS_DISTRIBUTED_SYNTHETIC_BACKWARD_H_
#define GENESIS_BENCHMARKS_DISTRIBUTED_SYNTHETIC_BACKWARD_H_

#include <cuda_runtime_api.h>

namespace genesis::benchmarks {

// Queues on `stream` a kernel of `blocks` blocks of 256 threads, each spinning on the
// GPU's global timer for `nanoseconds` from its start.
cudaError_t LaunchLayer(int blocks, long long nanoseconds, cudaStream_t stream);

}  // namespace genesis::benchmarks

#endif  // GENESIS_BENCHMARKS_DISTRIBUTED_SYNTHETIC_BACKWARD_H_
