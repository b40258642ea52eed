// Request sizes: rounding a request up to its block size (block_rounding, optionally
// power-of-two divisions), the pool that serves it, and the size of the segment that a
// new block of that size goes into.
#ifndef GENESIS_MEMORY_POOL_SIZE_CLASSES_H_
#define GENESIS_MEMORY_POOL_SIZE_CLASSES_H_

#include <cstddef>

#include "absl/status/statusor.h"
#include "genesis/memory/allocator_options.h"
#include "genesis/memory/pool/stat_index.h"

namespace genesis::memory::pool_internal {

// Sets *out to `n` rounded up to a multiple of `multiple` (> 0); false (and *out
// unchanged) if that overflows.
inline bool RoundUp(size_t n, size_t multiple, size_t* out) {
  size_t sum = 0;
  if (__builtin_add_overflow(n, multiple - 1, &sum)) return false;
  *out = sum / multiple * multiple;
  return true;
}

// The block size for a request of `bytes` (0 counts as 1): above block_rounding, first
// up to the next of roundup_power2_divisions steps between powers of two (if set), then
// to a multiple of block_rounding. InvalidArgument naming the size on overflow.
absl::StatusOr<size_t> RoundSize(size_t bytes, const AllocatorOptions& options);

// The pool (kSmall or kLarge) for a block of `size` (rounded) bytes.
inline int PoolFor(size_t size, const AllocatorOptions& options) {
  return size < options.small_size_limit ? kSmall : kLarge;
}

// The size of a new classic segment for a block of `size` in `pool`: small_segment_size
// for the small pool, large_segment_size below large_segment_threshold, else `size`
// rounded up to large_segment_rounding (InvalidArgument on overflow).
absl::StatusOr<size_t> SegmentSize(size_t size, int pool, const AllocatorOptions& options);

// The size of a new classic segment for a large block of `size` when the pool has
// `reserved` bytes, given `segment_size` = SegmentSize(size, kLarge, options): the
// shared segment grown with the pool (large_segment_max, allocator_options.h) if the
// block is small enough to share it, else `segment_size`.
size_t GrownSegmentSize(size_t size, size_t segment_size, size_t reserved,
                        const AllocatorOptions& options);

}  // namespace genesis::memory::pool_internal

#endif  // GENESIS_MEMORY_POOL_SIZE_CLASSES_H_
