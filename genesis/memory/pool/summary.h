// The pool's readable statistics table, like torch.cuda.memory_summary(): allocated,
// active, reserved, cached, inactive-split and requested memory (all, large pool, small
// pool; current / peak / total allocated / total freed), then the counters.
#ifndef GENESIS_MEMORY_POOL_SUMMARY_H_
#define GENESIS_MEMORY_POOL_SUMMARY_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "genesis/memory/memory_stats.h"

namespace genesis::memory::pool_internal {

// The table for `stats` of the pool on `device` with backend `backend_name`; with
// `expandable`, a row of maps and unmaps (chunks of `chunk` bytes).
std::string FormatSummary(const MemoryStats& stats, std::string_view device,
                          std::string_view backend_name, bool expandable, size_t chunk);

}  // namespace genesis::memory::pool_internal

#endif  // GENESIS_MEMORY_POOL_SUMMARY_H_
