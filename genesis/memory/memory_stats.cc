#include "genesis/memory/memory_stats.h"

#include <cstdlib>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace genesis::memory {

double MemoryStats::cache_hit_rate() const {
  const int64_t total = num_cache_hits + num_cache_misses;
  return total == 0 ? 0.0 : static_cast<double>(num_cache_hits) / total;
}

double MemoryStats::fragmentation_ratio() const {
  const int64_t cached = all.cached_bytes.current;
  if (cached <= 0) return 0.0;
  const double ratio = 1.0 - static_cast<double>(largest_free_block) / cached;
  return ratio < 0.0 ? 0.0 : ratio;
}

std::map<std::string, int64_t> MemoryStats::ToMap() const {
  std::map<std::string, int64_t> out;
  auto add_pool = [&out](const char* pool, const PoolMemoryStats& p) {
    auto add_stat = [&](const char* name, const MemoryStat& s) {
      out[absl::StrCat(name, ".", pool, ".current")] = s.current;
      out[absl::StrCat(name, ".", pool, ".peak")] = s.peak;
      out[absl::StrCat(name, ".", pool, ".allocated")] = s.allocated;
      out[absl::StrCat(name, ".", pool, ".freed")] = s.freed;
    };
    add_stat("allocated_bytes", p.allocated_bytes);
    add_stat("cached_bytes", p.cached_bytes);
    add_stat("reserved_bytes", p.reserved_bytes);
    add_stat("active_bytes", p.active_bytes);
    add_stat("inactive_split_bytes", p.inactive_split_bytes);
    add_stat("requested_bytes", p.requested_bytes);
  };
  add_pool("all", all);
  add_pool("small_pool", small_pool);
  add_pool("large_pool", large_pool);
  out["num_allocations"] = num_allocations;
  out["num_frees"] = num_frees;
  out["num_cache_hits"] = num_cache_hits;
  out["num_cache_misses"] = num_cache_misses;
  out["num_ooms"] = num_ooms;
  out["num_alloc_retries"] = num_alloc_retries;
  out["num_segments"] = num_segments;
  out["num_segment_allocs"] = num_segment_allocs;
  out["num_segment_frees"] = num_segment_frees;
  out["num_maps"] = num_maps;
  out["num_unmaps"] = num_unmaps;
  out["largest_free_block"] = largest_free_block;
  return out;
}

}  // namespace genesis::memory
