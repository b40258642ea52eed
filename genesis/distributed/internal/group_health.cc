#include "genesis/distributed/internal/group_health.h"

#include "absl/strings/str_cat.h"

namespace genesis::distributed::internal {

absl::Status GroupHealth::Check() const {
  if (!failed()) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(mu_);
  return absl::FailedPreconditionError(absl::StrCat(
      group_, " is unusable after an earlier failure: ", cause_.message()));
}

absl::Status GroupHealth::cause() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cause_;
}

bool GroupHealth::Fail(const absl::Status& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (failed_.load(std::memory_order_relaxed)) return false;
  cause_ = why.ok() ? absl::AbortedError("aborted") : why;
  failed_.store(true, std::memory_order_release);
  return true;
}

}  // namespace genesis::distributed::internal
