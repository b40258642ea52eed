// The NCCL backend in a build without CUDA or NCCL: every call says why it cannot work.
#include "genesis/distributed/nccl/nccl_communicator.h"

#include "absl/status/status.h"

namespace genesis::distributed::nccl_backend {
namespace {
absl::Status Unavailable() {
  return absl::FailedPreconditionError(
      "NCCL is not available: this build has no CUDA toolkit or no NCCL (tools/setup.sh "
      "says which)");
}
}  // namespace

absl::StatusOr<std::vector<char>> NewUniqueId() { return Unavailable(); }

absl::StatusOr<std::unique_ptr<Communicator>> ConnectNccl(GroupInfo, absl::Span<const char>) {
  return Unavailable();
}

absl::StatusOr<std::string> NcclVersion() { return Unavailable(); }

std::string NcclLibrary() { return ""; }

absl::Status CheckRequestedLibrary() { return Unavailable(); }

absl::StatusOr<RegistrationStats> BufferRegistration(const Communicator&) {
  return Unavailable();
}

absl::StatusOr<OneShotStats> OneShot(const Communicator&) { return Unavailable(); }

absl::StatusOr<CopyEngineStats> CopyEngine(const Communicator&) { return Unavailable(); }

}  // namespace genesis::distributed::nccl_backend
