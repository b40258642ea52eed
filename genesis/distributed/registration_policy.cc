#include "genesis/distributed/registration_policy.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "genesis/core/absl_compat.h"

namespace genesis::distributed {

bool RunsRegistered(NcclRegistration mode, NcclOperation op, size_t bytes) {
  switch (mode) {
    case NcclRegistration::kOff: return false;
    case NcclRegistration::kOn: return true;
    case NcclRegistration::kAuto:
      if (bytes > kAutoRegistrationMaxBytes) return false;
      switch (op) {
        case NcclOperation::kAllGather: return bytes >= kAutoRegistrationMinBytes;
        case NcclOperation::kAllToAll: return bytes >= kAutoAllToAllRegistrationMinBytes;
        case NcclOperation::kSendRecv: return bytes >= kAutoMessageRegistrationMinBytes;
        default: return false;
      }
  }
  return false;
}

std::string_view NcclRegistrationName(NcclRegistration mode) {
  switch (mode) {
    case NcclRegistration::kOff: return "off";
    case NcclRegistration::kAuto: return "auto";
    case NcclRegistration::kOn: return "on";
  }
  return "?";
}

absl::StatusOr<NcclRegistration> ParseNcclRegistration(std::string_view text) {
  if (text == "0" || text == "off") return NcclRegistration::kOff;
  if (text == "auto") return NcclRegistration::kAuto;
  if (text == "1" || text == "on") return NcclRegistration::kOn;
  return absl::InvalidArgumentError(
      absl::StrCat("NCCL buffer registration '", ToAbsl(text), "' is not 0, 1, off, on or auto"));
}

}  // namespace genesis::distributed
