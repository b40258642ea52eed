// Byte counts as people write them ("2GB", "512MiB", "1.5 GiB", "64k") and as genesis
// prints them ("139.8 GiB").
//
// Used wherever a size comes from a person: GENESIS_ALLOC_CONF, command-line flags,
// benchmark parameters; and wherever one is shown to a person: reports, OOM messages.
//
//   GENESIS_ASSIGN_OR_RETURN(uint64_t bytes, genesis::ParseByteSize("1.5 GiB"));
//   genesis::FormatByteSize(bytes);       // "1.5 GiB" (rounded, for reading)
//   genesis::FormatByteSizeExact(bytes);  // "1536MiB" (exact, parses back)
//
// Units (letters case-insensitive, so "gb", "GB" and "Gb" are the same):
//
//   none, B                     bytes
//   kB, MB, GB, TB, PB          decimal (SI): 10^3, 10^6, 10^9, 10^12, 10^15
//   KiB, MiB, GiB, TiB, PiB     binary (IEC): 2^10, 2^20, 2^30, 2^40, 2^50
//   K, M, G, T, P               binary, like PyTorch's and RMM's configuration strings
//
// So "2GB" is 2,000,000,000 bytes while "2G" and "2GiB" are 2,147,483,648.

#ifndef GENESIS_CORE_BYTE_SIZE_H_
#define GENESIS_CORE_BYTE_SIZE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace genesis {

// Parses a byte count: a non-negative decimal number, optionally followed (after
// optional spaces or tabs) by one of the units in the file comment. Whitespace around
// the whole text is ignored. The number is digits with an optional fractional part
// ("1.5"; not ".5", "5.", signs or exponents); the value is exact (no floating point)
// and rounded down to whole bytes ("1.5 B" is 1). Returns InvalidArgument, quoting the
// input and saying what is wrong, for empty text, a missing or negative number, "nan"
// or "inf", an unknown unit (listing the known ones), trailing characters ("2GBx",
// "1.2.3") and values above 2^64 - 1 bytes.
absl::StatusOr<uint64_t> ParseByteSize(std::string_view text);

// For reading: "17 B" below 1 KiB, else the value in the largest binary unit (KiB to
// PiB) that leaves at least 1, with one decimal: "1.0 KiB", "512.0 MiB", "139.8 GiB",
// "16384.0 PiB". Rounded, so it does not always parse back to the same count.
std::string FormatByteSize(uint64_t bytes);

// For configuration: exact, without a space, and ParseByteSize reads it back to
// `bytes`: the largest binary unit that divides `bytes` ("256MiB", "1536MiB", "3GiB"),
// or plain bytes ("1000", "0") when no unit does.
std::string FormatByteSizeExact(uint64_t bytes);

}  // namespace genesis

#endif  // GENESIS_CORE_BYTE_SIZE_H_
