// Checks that a pool can be made from given options and a given backend, before any
// memory is asked for: the options' own consistency, what the backend must offer for
// them (virtual memory, alignment), and the backend's total memory that some of them
// need.
#ifndef GENESIS_MEMORY_POOL_OPTIONS_CHECK_H_
#define GENESIS_MEMORY_POOL_OPTIONS_CHECK_H_

#include <cstddef>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "genesis/memory/allocator_options.h"
#include "genesis/memory/backend.h"

namespace genesis::memory::pool_internal {

// OK if `options` are consistent; else InvalidArgument naming the first bad value
// (CachingAllocator::ValidateOptions).
absl::Status ValidateOptions(const AllocatorOptions& options);

// OK if `backend` can serve a pool with `options`: FailedPrecondition if
// expandable_segments is kOn and it has no virtual memory, InvalidArgument if its
// virtual memory granularity (when used) or its alignment is not a power of two of at
// least block_rounding (512 for the alignment).
absl::Status CheckBackend(Backend& backend, const AllocatorOptions& options);

// The backend's total memory, or 0 where it cannot say and the options do not need it
// (memory_fraction and garbage_collection_threshold do: its error, annotated, then).
absl::StatusOr<size_t> TotalBytes(const Backend& backend, const AllocatorOptions& options);

}  // namespace genesis::memory::pool_internal

#endif  // GENESIS_MEMORY_POOL_OPTIONS_CHECK_H_
