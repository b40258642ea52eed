// Kernel self-test: proves that this build's GPU code runs on a device.
//
// A binary may find a GPU and still be unable to run its kernels on it: the code was
// compiled for other architectures (--//bazel:cuda_archs) and the PTX is too new for the
// driver, or the device is in a bad state. `CheckKernelLaunch` launches a small kernel
// compiled into this library, copies its output back and verifies it, so `genesis info`
// and tests can tell "GPU present" from "GPU usable". It compiles without nvcc for
// callers; in the CPU-only build it reports that CUDA code was not built.
#ifndef GENESIS_CUDA_KERNEL_CHECK_H_
#define GENESIS_CUDA_KERNEL_CHECK_H_

#include "absl/status/status.h"

namespace genesis::cuda {

// Runs a kernel on `device` that writes a known pattern to device memory and verifies
// the pattern on the host. OK means kernels of this binary run there; otherwise the
// status names the device and the CUDA error (for instance cudaErrorNoKernelImageForDevice
// when no compiled architecture fits). Restores the calling thread's current device.
absl::Status CheckKernelLaunch(int device);

// True if this binary contains CUDA kernels (false in the CPU-only build).
bool KernelsCompiledIn();

}  // namespace genesis::cuda

#endif  // GENESIS_CUDA_KERNEL_CHECK_H_
