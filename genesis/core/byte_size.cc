#include "genesis/core/byte_size.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "genesis/core/absl_compat.h"

namespace genesis {
namespace {

// absl::string_view is not std::string_view in every abseil configuration (Debian's is
// its own type), so convert explicitly at the boundary.

struct Unit {
  std::string_view name;  // Lower case; matched case-insensitively.
  uint64_t multiplier;
};

constexpr uint64_t kKi = uint64_t{1} << 10;
constexpr uint64_t kMi = uint64_t{1} << 20;
constexpr uint64_t kGi = uint64_t{1} << 30;
constexpr uint64_t kTi = uint64_t{1} << 40;
constexpr uint64_t kPi = uint64_t{1} << 50;

constexpr Unit kUnits[] = {
    {"", 1},
    {"b", 1},
    {"kb", 1'000},
    {"mb", 1'000'000},
    {"gb", 1'000'000'000},
    {"tb", 1'000'000'000'000},
    {"pb", 1'000'000'000'000'000},
    {"kib", kKi},
    {"mib", kMi},
    {"gib", kGi},
    {"tib", kTi},
    {"pib", kPi},
    {"k", kKi},
    {"m", kMi},
    {"g", kGi},
    {"t", kTi},
    {"p", kPi},
};

constexpr std::string_view kKnownUnits =
    "B, kB, MB, GB, TB, PB (powers of 1000), KiB, MiB, GiB, TiB, PiB or K, M, G, T, P "
    "(powers of 1024), case-insensitive";

absl::Status BadSize(std::string_view text, std::string_view reason) {
  // Escaped so that control characters or quotes in the input cannot garble the message.
  return absl::InvalidArgumentError(absl::StrCat(
      "invalid byte size ", Quoted(text), ": ", ToAbsl(reason)));
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsBlank(char c) { return c == ' ' || c == '\t'; }

std::string_view StripWhitespace(std::string_view s) {
  while (!s.empty() && absl::ascii_isspace(static_cast<unsigned char>(s.front()))) {
    s.remove_prefix(1);
  }
  while (!s.empty() && absl::ascii_isspace(static_cast<unsigned char>(s.back()))) {
    s.remove_suffix(1);
  }
  return s;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view lower) {
  if (a.size() != lower.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (absl::ascii_tolower(static_cast<unsigned char>(a[i])) != lower[i]) return false;
  }
  return true;
}

bool StartsWithIgnoreCase(std::string_view a, std::string_view lower) {
  return a.size() >= lower.size() && EqualsIgnoreCase(a.substr(0, lower.size()), lower);
}

// floor(0.<digits> * multiplier), exactly: the final carry of the schoolbook product
// of the digit string and the multiplier, from the last digit to the first.
// multiplier <= 10^15 < 2^60, so digit * multiplier + carry < 10 * 2^60 fits.
uint64_t FractionTimes(std::string_view digits, uint64_t multiplier) {
  uint64_t carry = 0;
  for (size_t i = digits.size(); i-- > 0;) {
    carry = (static_cast<uint64_t>(digits[i] - '0') * multiplier + carry) / 10;
  }
  return carry;
}

}  // namespace

absl::StatusOr<uint64_t> ParseByteSize(std::string_view text) {
  const std::string_view s = StripWhitespace(text);
  if (s.empty()) return BadSize(text, "empty (expected a number of bytes, e.g. '512MiB')");

  size_t pos = 0;
  while (pos < s.size() && IsDigit(s[pos])) ++pos;
  const std::string_view integer = s.substr(0, pos);
  if (integer.empty()) {
    if (s.front() == '-') return BadSize(text, "a size cannot be negative");
    if (StartsWithIgnoreCase(s, "nan") || StartsWithIgnoreCase(s, "inf") ||
        StartsWithIgnoreCase(s, "+inf")) {
      return BadSize(text, "not a finite number");
    }
    if (s.front() == '.') return BadSize(text, "expected a digit before '.'");
    return BadSize(text, "expected a number (digits) at the start, e.g. '512MiB'");
  }
  std::string_view fraction;
  if (pos < s.size() && s[pos] == '.') {
    const size_t start = ++pos;
    while (pos < s.size() && IsDigit(s[pos])) ++pos;
    fraction = s.substr(start, pos - start);
    if (fraction.empty()) return BadSize(text, "expected digits after '.'");
  }
  const std::string_view number = s.substr(0, pos);
  while (pos < s.size() && IsBlank(s[pos])) ++pos;
  const std::string_view unit_text = s.substr(pos);

  const Unit* unit = nullptr;
  for (const Unit& u : kUnits) {
    if (EqualsIgnoreCase(unit_text, u.name)) {
      unit = &u;
      break;
    }
  }
  if (unit == nullptr) {
    if (!absl::ascii_isalpha(static_cast<unsigned char>(unit_text.front()))) {
      return BadSize(text, absl::StrCat("unexpected ", Quoted(unit_text),
                                        " after the number ", ToAbsl(number)));
    }
    return BadSize(text, absl::StrCat("unknown unit ", Quoted(unit_text),
                                      " (known units: ", ToAbsl(kKnownUnits), ")"));
  }

  const std::string too_large =
      absl::StrCat("larger than the maximum of ", UINT64_MAX, " bytes (2^64 - 1)");
  uint64_t whole = 0;
  for (char c : integer) {
    if (__builtin_mul_overflow(whole, uint64_t{10}, &whole) ||
        __builtin_add_overflow(whole, static_cast<uint64_t>(c - '0'), &whole)) {
      return BadSize(text, too_large);
    }
  }
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(whole, unit->multiplier, &bytes) ||
      __builtin_add_overflow(bytes, FractionTimes(fraction, unit->multiplier), &bytes)) {
    return BadSize(text, too_large);
  }
  return bytes;
}

std::string FormatByteSize(uint64_t bytes) {
  static constexpr const char* kNames[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < kKi) return absl::StrCat(bytes, " B");
  double value = static_cast<double>(bytes) / 1024;
  int unit = 0;
  while (value >= 1024 && unit + 1 < 5) {
    value /= 1024;
    ++unit;
  }
  return absl::StrFormat("%.1f %s", value, kNames[unit]);
}

std::string FormatByteSizeExact(uint64_t bytes) {
  static constexpr Unit kExact[] = {
      {"PiB", kPi}, {"TiB", kTi}, {"GiB", kGi}, {"MiB", kMi}, {"KiB", kKi}};
  if (bytes != 0) {
    for (const Unit& u : kExact) {
      if (bytes % u.multiplier == 0) return absl::StrCat(bytes / u.multiplier, ToAbsl(u.name));
    }
  }
  return absl::StrCat(bytes);
}

}  // namespace genesis
