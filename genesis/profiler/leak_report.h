// Leak and large-allocation reports of a recorded history.
//
// CheckMemoryLeaks lists the allocations made while recording that are still live at
// its end, with size, age and call site, grouped by call site (largest total first).
// LargeAllocations lists every allocation of at least a minimum size, live or freed.
// Call sites need stacks (RecorderOptions::stacks); without them every allocation is
// grouped under one "(no call stack)" site. If rings dropped events, an allocation
// whose free was dropped looks live: the report says so.
#ifndef GENESIS_PROFILER_LEAK_REPORT_H_
#define GENESIS_PROFILER_LEAK_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "genesis/profiler/history.h"

namespace genesis::profiler {

struct LiveAllocation {
  std::string pool;  // SourceLabel.
  uint64_t address = 0;
  uint64_t size = 0;
  uint64_t requested = 0;
  // From its allocation to the end of the history.
  int64_t age_ns = 0;
  // For LargeAllocations: freed, after lifetime_ns.
  bool freed = false;
  int64_t lifetime_ns = 0;
  // "function (file:line)" of the call site, and the whole stack, innermost first.
  std::string site;
  std::vector<std::string> stack;
};

struct LeakSite {
  std::string site;
  int64_t count = 0;
  uint64_t bytes = 0;
  int64_t oldest_age_ns = 0;
  std::vector<LiveAllocation> allocations;  // Oldest first.
};

struct LeakReport {
  int64_t count = 0;
  uint64_t bytes = 0;
  std::vector<LeakSite> sites;
  uint64_t dropped_events = 0;
  bool ok() const { return count == 0; }
  std::string ToText() const;
  nlohmann::json ToJson() const;
};

// `symbolize_file_lines`: ask addr2line for file:line where available.
LeakReport CheckMemoryLeaks(const History& history, bool symbolize_file_lines = true);

// Allocations of at least `min_bytes` (block size), largest first.
std::vector<LiveAllocation> LargeAllocations(const History& history, uint64_t min_bytes,
                                             bool symbolize_file_lines = true);
std::string LargeAllocationsText(const std::vector<LiveAllocation>& allocations);
nlohmann::json LargeAllocationsJson(const std::vector<LiveAllocation>& allocations);

}  // namespace genesis::profiler

#endif  // GENESIS_PROFILER_LEAK_REPORT_H_
