// CPU-only build: no kernels exist, so every check reports that.
#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "genesis/cuda/kernel_check.h"

namespace genesis::cuda {

bool KernelsCompiledIn() { return false; }

absl::Status CheckKernelLaunch(int device) {
  return absl::FailedPreconditionError(absl::StrFormat(
      "kernel check on cuda:%d: genesis was built without CUDA (CPU-only build)", device));
}

}  // namespace genesis::cuda
