#include "genesis/core/device.h"

#include <cstddef>
#include <ostream>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "genesis/core/absl_compat.h"

namespace genesis {
namespace {

constexpr char kCpuName[] = "cpu";
constexpr char kCudaName[] = "cuda";

// absl::string_view is not std::string_view in every abseil configuration
// (e.g. Debian's), so convert explicitly at the boundary.

absl::Status BadDevice(std::string_view text, std::string_view reason) {
  return absl::InvalidArgumentError(absl::StrCat(
      "invalid device string ", Quoted(text), ": ", ToAbsl(reason)));
}

// Parses a CUDA index: decimal digits only, no leading zeros, <= kMaxIndex.
absl::StatusOr<int> ParseIndex(std::string_view text, std::string_view digits) {
  if (digits.empty()) return BadDevice(text, "missing device index after ':'");
  int value = 0;
  for (char c : digits) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) {
      return BadDevice(text,
                       "device index must be a non-negative decimal integer");
    }
    value = value * 10 + (c - '0');
    // Checked every digit so `value` can never overflow.
    if (value > Device::kMaxIndex) {
      return BadDevice(text,
                       absl::StrCat("device index exceeds the maximum of ",
                                    Device::kMaxIndex));
    }
  }
  // Rejected so that every accepted string has one canonical spelling and
  // "cuda:010" is not mistaken for an octal or padded index.
  if (digits.size() > 1 && digits.front() == '0') {
    return BadDevice(text, "device index must not have leading zeros");
  }
  return value;
}

}  // namespace

absl::StatusOr<Device> Device::Parse(std::string_view text) {
  if (text.empty()) {
    return absl::InvalidArgumentError("empty device string");
  }
  const size_t colon = text.find(':');
  const std::string_view type = text.substr(0, colon);
  const bool has_index = colon != std::string_view::npos;
  const std::string_view digits =
      has_index ? text.substr(colon + 1) : std::string_view();

  if (type == kCpuName) {
    if (!has_index || digits == "0") return Cpu();
    return BadDevice(text, "the only cpu device is 'cpu' (or 'cpu:0')");
  }
  if (type == kCudaName) {
    if (!has_index) return Cuda(0);
    absl::StatusOr<int> index = ParseIndex(text, digits);
    if (!index.ok()) return index.status();
    return Cuda(*index);
  }

  std::string message =
      absl::StrCat("unknown device type ", Quoted(type), " in ", Quoted(text),
                   ": expected 'cpu', 'cuda' or 'cuda:N'");
  const std::string lower = absl::AsciiStrToLower(ToAbsl(type));
  if (lower == kCpuName || lower == kCudaName) {
    absl::StrAppend(&message,
                    " (device types are case-sensitive; did you mean '", lower,
                    "'?)");
  }
  return absl::InvalidArgumentError(message);
}

std::string Device::ToString() const {
  if (is_cpu()) return std::string(kCpuName);
  return absl::StrCat(kCudaName, ":", index_);
}

std::ostream& operator<<(std::ostream& os, const Device& device) {
  return os << device.ToString();
}

}  // namespace genesis
