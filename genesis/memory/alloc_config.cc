#include "genesis/memory/alloc_config.h"

#include <bit>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "genesis/core/absl_compat.h"
#include "genesis/core/byte_size.h"
#include "genesis/memory/allocator_options.h"
#include "genesis/memory/pinned_mode.h"

namespace genesis::memory {
namespace {

// absl::string_view is not std::string_view in every abseil configuration (Debian's is
// its own type), so convert explicitly at the boundary.

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

// Blanks (space, tab) trimmed; `offset` advanced past the leading ones.
std::string_view Trim(std::string_view s, size_t* offset) {
  while (!s.empty() && IsBlank(s.front())) {
    s.remove_prefix(1);
    ++*offset;
  }
  while (!s.empty() && IsBlank(s.back())) s.remove_suffix(1);
  return s;
}

// Value parsers: OK, or a reason (without the key, which the caller adds).

absl::StatusOr<size_t> ParseSize(std::string_view value) {
  absl::StatusOr<uint64_t> bytes = ParseByteSize(value);
  if (!bytes.ok()) return bytes.status();
  if (*bytes > SIZE_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat("larger than the largest size_t (", SIZE_MAX, ")"));
  }
  return static_cast<size_t>(*bytes);
}

// A size of expandable pieces: a power of two of at least a GPU's 2 MiB chunk.
absl::StatusOr<size_t> ParsePieceSize(std::string_view value) {
  absl::StatusOr<size_t> bytes = ParseSize(value);
  if (bytes.ok() && (*bytes < 2 * kMiB || !std::has_single_bit(*bytes))) {
    return absl::InvalidArgumentError("must be a power of two >= 2MiB");
  }
  return bytes;
}

absl::StatusOr<size_t> ParsePositiveSize(std::string_view value) {
  absl::StatusOr<size_t> bytes = ParseSize(value);
  if (bytes.ok() && *bytes == 0) return absl::InvalidArgumentError("must be > 0");
  return bytes;
}

// A size, or "none" for kNoLimit.
absl::StatusOr<size_t> ParseLimit(std::string_view value) {
  if (value == "none") return kNoLimit;
  return ParseSize(value);
}

absl::StatusOr<double> ParseNumber(std::string_view value) {
  double number = 0;
  const char* end = value.data() + value.size();
  const auto [ptr, ec] = std::from_chars(value.data(), end, number);
  if (ec != std::errc() || ptr != end) {
    return absl::InvalidArgumentError("not a number (expected e.g. 0.8)");
  }
  return number;
}

absl::StatusOr<bool> ParseBool(std::string_view value) {
  if (value == "true" || value == "1") return true;
  if (value == "false" || value == "0") return false;
  return absl::InvalidArgumentError("expected true, false, 1 or 0");
}


using Setter = absl::Status (*)(std::string_view value, AllocConfig& config);

struct Key {
  std::string_view name;
  Setter set;
};

// Assigns the result of `parse` to `field` if it is OK; returns its status.
template <typename T, typename Parse>
absl::Status Assign(std::string_view value, Parse parse, T& field) {
  absl::StatusOr<T> parsed = parse(value);
  if (!parsed.ok()) return parsed.status();
  field = *parsed;
  return absl::OkStatus();
}

#define GENESIS_SIZE_KEY(field)                                             \
  Key {                                                                     \
    #field, [](std::string_view value, AllocConfig& config) {               \
      return Assign(value, ParsePositiveSize, config.options.field);        \
    }                                                                       \
  }

// In the order FormatAllocConfig writes them (the order of the header's table).
const Key kKeys[] = {
    {"block_rounding",
     [](std::string_view value, AllocConfig& config) {
       absl::StatusOr<size_t> bytes = ParseSize(value);
       if (!bytes.ok()) return bytes.status();
       if (*bytes < 512 || !std::has_single_bit(*bytes)) {
         return absl::InvalidArgumentError("must be a power of two >= 512");
       }
       config.options.block_rounding = *bytes;
       return absl::OkStatus();
     }},
    GENESIS_SIZE_KEY(small_size_limit),
    GENESIS_SIZE_KEY(small_segment_size),
    GENESIS_SIZE_KEY(large_segment_size),
    GENESIS_SIZE_KEY(large_segment_threshold),
    GENESIS_SIZE_KEY(large_segment_rounding),
    GENESIS_SIZE_KEY(large_segment_max),
    {"roundup_power2_divisions",
     [](std::string_view value, AllocConfig& config) {
       int divisions = 0;
       const char* end = value.data() + value.size();
       const auto [ptr, ec] = std::from_chars(value.data(), end, divisions);
       if (ec != std::errc() || ptr != end) {
         return absl::InvalidArgumentError("not an integer (expected 0, 1, 2, 4, ..., 64)");
       }
       if (divisions != 0 && (divisions < 0 || divisions > 64 ||
                              !std::has_single_bit(static_cast<uint64_t>(divisions)))) {
         return absl::InvalidArgumentError("must be 0 or a power of two <= 64");
       }
       config.options.roundup_power2_divisions = divisions;
       return absl::OkStatus();
     }},
    {"max_split_size",
     [](std::string_view value, AllocConfig& config) {
       return Assign(value, ParseLimit, config.options.max_split_size);
     }},
    {"memory_fraction",
     [](std::string_view value, AllocConfig& config) {
       absl::StatusOr<double> fraction = ParseNumber(value);
       if (!fraction.ok()) return fraction.status();
       // Written so that NaN fails too.
       if (!(*fraction > 0.0 && *fraction <= 1.0)) {
         return absl::InvalidArgumentError("must be in (0, 1]");
       }
       config.options.memory_fraction = *fraction;
       return absl::OkStatus();
     }},
    {"cache_limit",
     [](std::string_view value, AllocConfig& config) {
       return Assign(value, ParseLimit, config.options.cache_limit);
     }},
    {"garbage_collection_threshold",
     [](std::string_view value, AllocConfig& config) {
       absl::StatusOr<double> threshold = ParseNumber(value);
       if (!threshold.ok()) return threshold.status();
       if (!(*threshold >= 0.0 && *threshold <= 1.0)) {
         return absl::InvalidArgumentError("must be in [0, 1] (0: off)");
       }
       config.options.garbage_collection_threshold = *threshold;
       return absl::OkStatus();
     }},
    {"warm_up",
     [](std::string_view value, AllocConfig& config) {
       std::vector<size_t> sizes;
       if (value != "none") {
         size_t start = 0;
         while (true) {
           const size_t plus = value.find('+', start);
           size_t unused = 0;
           const std::string_view part =
               Trim(value.substr(start, plus == std::string_view::npos ? plus : plus - start),
                    &unused);
           absl::StatusOr<size_t> bytes = ParsePositiveSize(part);
           if (!bytes.ok()) {
             return absl::InvalidArgumentError(
                 absl::StrCat("size ", sizes.size() + 1, " ", Quoted(part), ": ",
                              bytes.status().message(),
                              " (expected sizes joined by '+', e.g. 64MiB+1GiB, or none)"));
           }
           sizes.push_back(*bytes);
           if (plus == std::string_view::npos) break;
           start = plus + 1;
         }
       }
       config.options.warm_up_sizes = std::move(sizes);
       return absl::OkStatus();
     }},
    {"thread_cache_blocks",
     [](std::string_view value, AllocConfig& config) {
       int blocks = 0;
       const char* end = value.data() + value.size();
       const auto [ptr, ec] = std::from_chars(value.data(), end, blocks);
       if (ec != std::errc() || ptr != end || blocks < 0 || blocks > 1024) {
         return absl::InvalidArgumentError("expected an integer in [0, 1024] (0: off)");
       }
       config.options.thread_cache_blocks = blocks;
       return absl::OkStatus();
     }},
    GENESIS_SIZE_KEY(thread_cache_bytes),
    {"adaptive_caching",
     [](std::string_view value, AllocConfig& config) {
       return Assign(value, ParseBool, config.options.adaptive_caching);
     }},
    {"expandable_segments",
     [](std::string_view value, AllocConfig& config) {
       if (value == "auto") {
         config.options.expandable_segments = ExpandableSegments::kAuto;
         return absl::OkStatus();
       }
       absl::StatusOr<bool> on = ParseBool(value);
       if (!on.ok()) return absl::InvalidArgumentError("expected auto, true or false");
       config.options.expandable_segments =
           *on ? ExpandableSegments::kOn : ExpandableSegments::kOff;
       return absl::OkStatus();
     }},
    {"expandable_piece_size",
     [](std::string_view value, AllocConfig& config) {
       absl::StatusOr<size_t> bytes = ParsePieceSize(value);
       if (!bytes.ok()) return bytes.status();
       config.options.expandable_piece_size = *bytes;
       return absl::OkStatus();
     }},
    {"expandable_min_piece",
     [](std::string_view value, AllocConfig& config) {
       absl::StatusOr<size_t> bytes = ParsePieceSize(value);
       if (!bytes.ok()) return bytes.status();
       config.options.expandable_min_piece = *bytes;
       return absl::OkStatus();
     }},
    {"expandable_piece_layout",
     [](std::string_view value, AllocConfig& config) {
       if (value == "aligned") {
         config.options.expandable_piece_layout = PieceLayout::kAligned;
       } else if (value == "whole") {
         config.options.expandable_piece_layout = PieceLayout::kWhole;
       } else {
         return absl::InvalidArgumentError("expected aligned or whole");
       }
       return absl::OkStatus();
     }},
    {"expandable_min_map",
     [](std::string_view value, AllocConfig& config) {
       return Assign(value, ParseSize, config.options.expandable_min_map);
     }},
    {"pinned_mode",
     [](std::string_view value, AllocConfig& config) {
       if (value == PinnedModeName(PinnedMode::kAlloc)) {
         config.pinned_mode = PinnedMode::kAlloc;
       } else if (value == PinnedModeName(PinnedMode::kRegister)) {
         config.pinned_mode = PinnedMode::kRegister;
       } else {
         return absl::InvalidArgumentError("expected alloc or register");
       }
       return absl::OkStatus();
     }},
};

#undef GENESIS_SIZE_KEY

constexpr size_t kKeyCount = sizeof(kKeys) / sizeof(kKeys[0]);

std::string ValidKeys() {
  std::vector<absl::string_view> names;
  for (const Key& key : kKeys) names.push_back(ToAbsl(key.name));
  return absl::StrJoin(names, ", ");
}

absl::Status Error(size_t column, std::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("allocator config, column ", column, ": ", ToAbsl(what)));
}

std::string FormatNumber(double value) {
  char buffer[64];
  const auto [ptr, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  if (ec != std::errc()) return absl::StrCat(value);  // Cannot happen with 64 chars.
  return std::string(buffer, ptr);
}

std::string FormatLimit(size_t bytes) {
  return bytes == kNoLimit ? "none" : FormatByteSizeExact(bytes);
}

}  // namespace

absl::StatusOr<AllocConfig> ParseAllocConfig(std::string_view text, AllocConfig base) {
  size_t unused = 0;
  if (Trim(text, &unused).empty()) return base;

  AllocConfig config = std::move(base);
  size_t seen_at[kKeyCount] = {};  // 1-based column where each key was set; 0: not yet.
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const size_t end = comma == std::string_view::npos ? text.size() : comma;
    size_t column = start + 1;  // 1-based, of the first non-blank character.
    const std::string_view entry = Trim(text.substr(start, end - start), &column);
    if (entry.empty()) {
      return Error(column, "empty entry (a ',' at the start or end, or two in a row); "
                           "expected key:value");
    }
    const size_t colon = entry.find(':');
    if (colon == std::string_view::npos) {
      return Error(column, absl::StrCat("entry ", Quoted(entry),
                                        " has no ':'; expected key:value"));
    }
    size_t key_column = column;
    const std::string_view key = Trim(entry.substr(0, colon), &key_column);
    size_t value_column = column + colon + 1;
    const std::string_view value = Trim(entry.substr(colon + 1), &value_column);
    if (key.empty()) {
      return Error(column, absl::StrCat("entry ", Quoted(entry), " has no key before ':'"));
    }
    size_t index = 0;
    while (index < kKeyCount && kKeys[index].name != key) ++index;
    if (index == kKeyCount) {
      return Error(key_column, absl::StrCat("unknown key ", Quoted(key),
                                            " (valid keys: ", ValidKeys(), ")"));
    }
    if (value.empty()) {
      return Error(key_column, absl::StrCat("key ", Quoted(key), " has no value"));
    }
    if (seen_at[index] != 0) {
      return Error(key_column,
                   absl::StrCat("key ", Quoted(key), " (value ", Quoted(value),
                                ") is already set at column ", seen_at[index],
                                "; each key may appear once"));
    }
    seen_at[index] = key_column;
    if (absl::Status status = kKeys[index].set(value, config); !status.ok()) {
      return Error(value_column, absl::StrCat("bad value ", Quoted(value), " for key ",
                                              Quoted(key), ": ", status.message()));
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return config;
}

absl::StatusOr<AllocConfig> AllocConfigFromEnvironment() {
  const std::string name(kAllocConfEnvVar);
  const char* value = std::getenv(name.c_str());
  if (value == nullptr) return AllocConfig{};
  absl::StatusOr<AllocConfig> config = ParseAllocConfig(value);
  if (!config.ok()) {
    return absl::Status(config.status().code(),
                        absl::StrCat(name, "=", Quoted(value), ": ", config.status().message()));
  }
  return config;
}

std::string FormatAllocConfig(const AllocConfig& config) {
  const AllocatorOptions& o = config.options;
  std::vector<std::string> warm_up_sizes;
  for (size_t bytes : o.warm_up_sizes) warm_up_sizes.push_back(FormatByteSizeExact(bytes));
  const std::string warm_up =
      warm_up_sizes.empty() ? "none" : absl::StrJoin(warm_up_sizes, "+");
  return absl::StrCat(
      "block_rounding:", FormatByteSizeExact(o.block_rounding),
      ",small_size_limit:", FormatByteSizeExact(o.small_size_limit),
      ",small_segment_size:", FormatByteSizeExact(o.small_segment_size),
      ",large_segment_size:", FormatByteSizeExact(o.large_segment_size),
      ",large_segment_threshold:", FormatByteSizeExact(o.large_segment_threshold),
      ",large_segment_rounding:", FormatByteSizeExact(o.large_segment_rounding),
      ",large_segment_max:", FormatByteSizeExact(o.large_segment_max),
      ",roundup_power2_divisions:", o.roundup_power2_divisions,
      ",max_split_size:", FormatLimit(o.max_split_size),
      ",memory_fraction:", FormatNumber(o.memory_fraction),
      ",cache_limit:", FormatLimit(o.cache_limit),
      ",garbage_collection_threshold:", FormatNumber(o.garbage_collection_threshold),
      ",warm_up:", warm_up,
      ",thread_cache_blocks:", o.thread_cache_blocks,
      ",thread_cache_bytes:", FormatByteSizeExact(o.thread_cache_bytes),
      ",adaptive_caching:", o.adaptive_caching ? "true" : "false",
      ",expandable_segments:",
      o.expandable_segments == ExpandableSegments::kAuto ? "auto"
      : o.expandable_segments == ExpandableSegments::kOn ? "true"
                                                         : "false",
      ",expandable_piece_size:", FormatByteSizeExact(o.expandable_piece_size),
      ",expandable_min_piece:", FormatByteSizeExact(o.expandable_min_piece),
      ",expandable_piece_layout:",
      o.expandable_piece_layout == PieceLayout::kWhole ? "whole" : "aligned",
      ",expandable_min_map:", FormatByteSizeExact(o.expandable_min_map),
      ",pinned_mode:", ToAbsl(PinnedModeName(config.pinned_mode)));
}

}  // namespace genesis::memory
