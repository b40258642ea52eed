// The Chrome trace event JSON of a recorded history, which Perfetto (ui.perfetto.dev)
// and chrome://tracing open.
//
// One process per observed pool (named after it) with:
//   * counters ("C") "memory": allocated, reserved and active bytes, at every change;
//   * async slices ("b"/"e", category "segment") for each segment and each mapped range
//     of an expandable segment, from its allocation (mapping) to its release (unmapping)
//     or the end of the history;
//   * async slices (category "allocation") for allocations of at least
//     `long_allocation_bytes` or living at least `long_allocation_ns`;
//   * instant events ("i") for out-of-memory errors (with the pool's state).
// Markers are global instant events. Async slices are used because allocation lifetimes
// overlap arbitrarily, and Perfetto needs the slices of one thread to nest. Times are
// microseconds from the history's start. Every event has ph, ts, pid and tid.
#ifndef GENESIS_PROFILER_CHROME_TRACE_H_
#define GENESIS_PROFILER_CHROME_TRACE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "genesis/profiler/history.h"

namespace genesis::profiler {

struct ChromeTraceOptions {
  uint64_t long_allocation_bytes = uint64_t{16} << 20;
  int64_t long_allocation_ns = 100'000'000;
};

nlohmann::json ChromeTrace(const History& history,
                           const ChromeTraceOptions& options = ChromeTraceOptions());

// Writes ChromeTrace(history) to `path` (errors as WriteOutputFile).
absl::Status WriteChromeTrace(const History& history, const std::string& path,
                              const ChromeTraceOptions& options = ChromeTraceOptions());

}  // namespace genesis::profiler

#endif  // GENESIS_PROFILER_CHROME_TRACE_H_
