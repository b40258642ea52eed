// Bridges between the standard library and the abseil genesis is built against, and
// the quoting of user input in error messages.
//
// Debian's abseil (20220623) is configured with its own absl::string_view rather than an
// alias of std::string_view, so a std::string_view does not convert to
// absl::AlphaNum or absl::string_view by itself. Use ToAbsl at those boundaries:
//   absl::StrCat("unknown dtype '", ToAbsl(name), "'")
#ifndef GENESIS_CORE_ABSL_COMPAT_H_
#define GENESIS_CORE_ABSL_COMPAT_H_

#include <string>
#include <string_view>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace genesis {

// The same characters as an absl::string_view (no copy).
inline absl::string_view ToAbsl(std::string_view s) { return {s.data(), s.size()}; }

// `s` in single quotes with control characters and quotes escaped, for error messages
// that repeat user input ("unknown dtype 'x'"): hostile input cannot make them mislead.
inline std::string Quoted(std::string_view s) {
  return absl::StrCat("'", absl::CHexEscape(ToAbsl(s)), "'");
}

}  // namespace genesis

#endif  // GENESIS_CORE_ABSL_COMPAT_H_
