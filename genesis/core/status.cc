#include "genesis/core/status.h"

#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"

namespace genesis {
namespace {

absl::Status NonOkOrInternal(absl::Status status) {
  if (status.ok()) {
    return absl::InternalError(
        "StatusError constructed from an OK status (this is a bug in the "
        "throwing code)");
  }
  return status;
}

}  // namespace

absl::Status Annotate(const absl::Status& status, std::string_view context) {
  if (status.ok() || context.empty()) return status;
  std::string message(context);
  if (const absl::string_view original = status.message(); !original.empty()) {
    message.append(": ").append(original.data(), original.size());
  }
  absl::Status annotated(status.code(), message);
  // Payloads carry machine-readable detail that callers may dispatch on;
  // annotating for humans must not drop it.
  status.ForEachPayload(
      [&annotated](absl::string_view type_url, const absl::Cord& payload) {
        annotated.SetPayload(type_url, payload);
      });
  return annotated;
}

StatusError::StatusError(absl::Status status)
    : StatusError(NonOkOrInternal(std::move(status)), NonOkTag{}) {}

StatusError::StatusError(absl::Status non_ok, NonOkTag)
    : std::runtime_error(non_ok.ToString()), status_(std::move(non_ok)) {}

void ThrowIfError(const absl::Status& status) {
  if (!status.ok()) throw StatusError(status);
}

}  // namespace genesis
