// The error for a pointer that is not the start of a live allocation, classified by
// where it points: a block that is already free (double free), the inside of a block
// (an interior pointer, or a block freed and merged away), or no segment of the pool.
#ifndef GENESIS_MEMORY_POOL_POINTER_ERRORS_H_
#define GENESIS_MEMORY_POOL_POINTER_ERRORS_H_

#include <string_view>

#include "absl/status/status.h"
#include "genesis/memory/pool/segment_map.h"

namespace genesis::memory::pool_internal {

// InvalidArgument "<what>(<ptr>): ..." saying which of the three `ptr` is, in the pool
// of `segments` (whose backend is `backend_name`). The caller holds the pool lock.
absl::Status BadPointerError(const SegmentMap& segments, const void* ptr, const char* what,
                             std::string_view backend_name);

}  // namespace genesis::memory::pool_internal

#endif  // GENESIS_MEMORY_POOL_POINTER_ERRORS_H_
