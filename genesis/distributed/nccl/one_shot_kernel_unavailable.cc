// The one-shot collectives where the build's NCCL has no device API (nccl_device.h,
// NCCL 2.28+): groups find them unavailable and run NCCL's.
#include "genesis/distributed/nccl/one_shot_kernel.h"

namespace genesis::distributed::nccl_backend {
namespace {
absl::Status Unavailable() {
  return absl::FailedPreconditionError(
      "this build's NCCL has no device API (nccl_device.h, NCCL 2.28 or later)");
}
}  // namespace

absl::Status LaunchOneShot(const OneShotArgs&, CUstream_st*) { return Unavailable(); }

absl::Status LaunchOneShotPeers(const OneShotPeerArgs&, CUstream_st*) { return Unavailable(); }

absl::StatusOr<WindowRanks> ReadWindowRanks(void*) { return Unavailable(); }

}  // namespace genesis::distributed::nccl_backend
