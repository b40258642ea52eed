#include "genesis/memory/pool/size_classes.h"

#include <bit>
#include <cstddef>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace genesis::memory::pool_internal {

absl::StatusOr<size_t> RoundSize(size_t bytes, const AllocatorOptions& options) {
  size_t n = bytes == 0 ? 1 : bytes;
  const int div = options.roundup_power2_divisions;
  if (div > 1 && n > options.block_rounding) {
    const size_t floor = std::bit_floor(n);
    const size_t step = floor / static_cast<size_t>(div);
    if (floor != n && step > 0 && !RoundUp(n, step, &n)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Allocate: size ", bytes, " overflows when rounded to a power-of-two division"));
    }
  }
  size_t rounded = 0;
  if (!RoundUp(n, options.block_rounding, &rounded)) {
    return absl::InvalidArgumentError(absl::StrCat("Allocate: size ", bytes,
                                                   " overflows when rounded up to ",
                                                   options.block_rounding, " bytes"));
  }
  return rounded;
}

absl::StatusOr<size_t> SegmentSize(size_t size, int pool, const AllocatorOptions& options) {
  if (pool == kSmall) return options.small_segment_size;
  if (size < options.large_segment_threshold) return options.large_segment_size;
  size_t rounded = 0;
  if (!RoundUp(size, options.large_segment_rounding, &rounded)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Allocate: size ", size, " overflows when rounded up to a segment of ",
        options.large_segment_rounding, " bytes"));
  }
  return rounded;
}

}  // namespace genesis::memory::pool_internal
