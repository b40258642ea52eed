// A recorded history in PyTorch's memory-snapshot layout (torch.cuda.memory._snapshot()),
// which the viewer at pytorch.org/memory_viz draws.
//
// {segments: [{device, address, total_size, allocated_size, active_size, requested_size,
//   stream, segment_type, segment_pool_id, is_expandable, frames, blocks: [{address, size,
//   requested_size, state, frames}]}], device_traces: [[{action, addr, size, stream,
//   time_us, frames}]], allocator_settings, external_annotations}
//
// Segments and blocks are the pools' state when the history was collected; device
// traces hold alloc, free_requested + free_completed (the pool reports a free once),
// segment_alloc, segment_free, segment_map, segment_unmap and oom (with device_free) per
// device index (cuda:N is N, host pools 0). Frames are the recorded stacks, symbolized.
// The viewer reads a pickle: WriteTorchSnapshotPickle writes one (protocol 2, only the
// opcodes the viewer's unpickler knows); the JSON turns into one with
//   python3 -c "import json,pickle,sys; pickle.dump(json.load(open(sys.argv[1])),
//               open(sys.argv[2],'wb'), protocol=4)" snapshot.json snapshot.pickle
#ifndef GENESIS_PROFILER_TORCH_SNAPSHOT_H_
#define GENESIS_PROFILER_TORCH_SNAPSHOT_H_

#include <string>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "genesis/profiler/history.h"

namespace genesis::profiler {

// `max_trace_entries` per device (the viewer cuts off past ~600k); the newest are kept.
nlohmann::json TorchSnapshot(const History& history, size_t max_trace_entries = 500'000);

absl::Status WriteTorchSnapshotJson(const History& history, const std::string& path);
absl::Status WriteTorchSnapshotPickle(const History& history, const std::string& path);

// `value` as a pickle (protocol 2) of dicts, lists, str, int, float, bool and None.
std::string ToPickle(const nlohmann::json& value);

}  // namespace genesis::profiler

#endif  // GENESIS_PROFILER_TORCH_SNAPSHOT_H_
