// The one-shot all_reduce where the build's NCCL has no device API (nccl_device.h,
// NCCL 2.28+): groups find it unavailable and run NCCL's all_reduce.
#include "genesis/distributed/nccl/one_shot_kernel.h"

namespace genesis::distributed::nccl_backend {
namespace {
absl::Status Unavailable() {
  return absl::FailedPreconditionError(
      "this build's NCCL has no device API (nccl_device.h, NCCL 2.28 or later)");
}
}  // namespace

absl::Status LaunchOneShotAllReduce(const OneShotArgs&, CUstream_st*) { return Unavailable(); }

absl::StatusOr<WindowRanks> ReadWindowRanks(void*) { return Unavailable(); }

}  // namespace genesis::distributed::nccl_backend
