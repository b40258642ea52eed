#include "genesis/core/dtype.h"

#include <cstddef>
#include <iterator>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "genesis/core/absl_compat.h"

namespace genesis {
namespace {

// Aliases accepted besides the canonical names; see ParseDType's comment.
constexpr std::pair<std::string_view, DType> kAliases[] = {
    {"float", DType::kFloat32},  {"fp32", DType::kFloat32},
    {"double", DType::kFloat64}, {"fp64", DType::kFloat64},
    {"half", DType::kFloat16},   {"fp16", DType::kFloat16},
    {"bf16", DType::kBFloat16},  {"int", DType::kInt32},
    {"long", DType::kInt64},     {"short", DType::kInt16},
};

// absl::string_view is not std::string_view in every abseil configuration
// (e.g. Debian's), so convert explicitly at the boundary.

const DType* Lookup(std::string_view name) {
  for (const DType& dtype : kAllDTypes) {
    if (DTypeName(dtype) == name) return &dtype;
  }
  for (const auto& [alias, dtype] : kAliases) {
    if (alias == name) return &dtype;
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<DType> ParseDType(std::string_view name) {
  if (const DType* dtype = Lookup(name)) return *dtype;

  // Escaped so that control characters or quotes in hostile input cannot make
  // the error message misleading.
  std::string message = absl::StrCat(
      "unknown dtype ", Quoted(name), ": expected one of ");
  for (size_t i = 0; i < kAllDTypes.size(); ++i) {
    absl::StrAppend(&message, i == 0 ? "" : ", ",
                    ToAbsl(DTypeName(kAllDTypes[i])));
  }
  absl::StrAppend(&message, " or an alias (");
  for (size_t i = 0; i < std::size(kAliases); ++i) {
    absl::StrAppend(&message, i == 0 ? "" : ", ", ToAbsl(kAliases[i].first));
  }
  absl::StrAppend(&message, ")");
  const std::string lower = absl::AsciiStrToLower(ToAbsl(name));
  if (lower != name && Lookup(lower) != nullptr) {
    absl::StrAppend(&message,
                    " (dtype names are case-sensitive; did you mean '", lower,
                    "'?)");
  }
  return absl::InvalidArgumentError(message);
}

std::ostream& operator<<(std::ostream& os, DType dtype) {
  return os << DTypeName(dtype);
}

}  // namespace genesis
