#include "genesis/memory/pool/size_classes.h"

#include <algorithm>
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

size_t GrownSegmentSize(size_t size, size_t segment_size, size_t reserved,
                        const AllocatorOptions& options) {
  // An eighth: a grown segment adds at most 12.5% to what the pool holds.
  constexpr size_t kShareOfReserved = 8;
  const size_t shared =
      std::clamp(std::bit_floor(reserved / kShareOfReserved), options.large_segment_size,
                 std::max(options.large_segment_max, options.large_segment_size));
  if (shared == options.large_segment_size) return segment_size;
  return size < std::max(shared / 2, options.large_segment_threshold) ? shared : segment_size;
}

}  // namespace genesis::memory::pool_internal
