#include "genesis/memory/pool/summary.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "genesis/core/absl_compat.h"
#include "genesis/core/byte_size.h"

namespace genesis::memory::pool_internal {
namespace {

// Figures here are never negative (the stats' invariants); FormatByteSize takes unsigned.
std::string Human(int64_t n) { return FormatByteSize(static_cast<uint64_t>(n)); }

}  // namespace

std::string FormatSummary(const MemoryStats& st, std::string_view device,
                          std::string_view backend_name, bool expandable, size_t chunk) {
  std::string out;
  const std::string rule(86, '=');
  const std::string thin(86, '-');
  absl::StrAppend(&out, rule, "\n");
  absl::StrAppendFormat(&out, " CachingAllocator summary: %s (%s)\n", ToAbsl(device),
                        ToAbsl(backend_name));
  absl::StrAppend(&out, thin, "\n");
  absl::StrAppendFormat(&out, " %-30s | %11s | %11s | %11s | %11s\n", "Metric",
                        "Cur usage", "Peak usage", "Tot alloc", "Tot freed");
  absl::StrAppend(&out, thin, "\n");
  auto row = [&out](const char* name, const MemoryStat& s) {
    absl::StrAppendFormat(&out, " %-30s | %11s | %11s | %11s | %11s\n", name,
                          Human(s.current), Human(s.peak), Human(s.allocated),
                          Human(s.freed));
  };
  auto group = [&](const char* name, MemoryStat PoolMemoryStats::*field) {
    row(name, st.all.*field);
    row("  from large pool", st.large_pool.*field);
    row("  from small pool", st.small_pool.*field);
  };
  group("Allocated memory", &PoolMemoryStats::allocated_bytes);
  group("Active memory", &PoolMemoryStats::active_bytes);
  group("Reserved memory", &PoolMemoryStats::reserved_bytes);
  group("Cached memory", &PoolMemoryStats::cached_bytes);
  group("Non-releasable (inactive split)", &PoolMemoryStats::inactive_split_bytes);
  group("Requested memory", &PoolMemoryStats::requested_bytes);
  absl::StrAppend(&out, thin, "\n");
  absl::StrAppendFormat(&out, " %-30s | %d\n", "Allocations", st.num_allocations);
  absl::StrAppendFormat(&out, " %-30s | %d\n", "Frees", st.num_frees);
  absl::StrAppendFormat(&out, " %-30s | %d hits, %d misses (%.1f%% hit rate)\n", "Cache",
                        st.num_cache_hits, st.num_cache_misses, 100.0 * st.cache_hit_rate());
  absl::StrAppendFormat(&out, " %-30s | %d now, %d allocated, %d freed\n", "Segments",
                        st.num_segments, st.num_segment_allocs, st.num_segment_frees);
  if (expandable) {
    absl::StrAppendFormat(&out, " %-30s | %d maps, %d unmaps (chunks of %s)\n",
                          "Expandable segments", st.num_maps, st.num_unmaps,
                          Human(static_cast<int64_t>(chunk)));
  }
  absl::StrAppendFormat(&out, " %-30s | %d OOMs, %d retries\n", "Out of memory",
                        st.num_ooms, st.num_alloc_retries);
  absl::StrAppendFormat(&out, " %-30s | %s, fragmentation %.2f\n", "Largest free block",
                        Human(st.largest_free_block), st.fragmentation_ratio());
  absl::StrAppend(&out, rule, "\n");
  return out;
}

}  // namespace genesis::memory::pool_internal
