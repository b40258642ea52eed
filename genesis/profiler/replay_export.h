// A recorded history as an allocation trace that `genesis replay` reads
// (genesis/replay/trace.h), so a profiled run can be replayed under other pool settings.
//
// One pool's allocations and frees, in time order: alloc with the requested size, then
// free_requested and free_completed at the free. Frees of blocks allocated before
// recording began are left out (the trace would not parse). Markers named "step <n>"
// become "# step <n>" lines.
#ifndef GENESIS_PROFILER_REPLAY_EXPORT_H_
#define GENESIS_PROFILER_REPLAY_EXPORT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "genesis/profiler/history.h"
#include "genesis/replay/trace.h"

namespace genesis::profiler {

// The trace of History::sources[source]. InvalidArgument if there is no such source.
absl::StatusOr<std::vector<replay::TraceEvent>> ToReplayTrace(const History& history,
                                                              int source = 0);

// Writes ToReplayTrace as text (gzip if `gzip`); errors as ToReplayTrace and WriteTrace.
absl::Status WriteReplayTrace(const History& history, const std::string& path,
                              int source = 0, bool gzip = false);

}  // namespace genesis::profiler

#endif  // GENESIS_PROFILER_REPLAY_EXPORT_H_
