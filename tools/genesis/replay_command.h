// `genesis replay TRACE...`: replays allocation traces through a pool configuration and
// reports what the pool reserved for what the program allocated.
#ifndef GENESIS_TOOLS_GENESIS_REPLAY_COMMAND_H_
#define GENESIS_TOOLS_GENESIS_REPLAY_COMMAND_H_

#include <string>

#include "absl/types/span.h"

namespace genesis::cli {

// Replays each trace file (text or .gz; see genesis/replay/trace.h) through a fresh pool
// with the settings of --alloc_conf (GENESIS_ALLOC_CONF syntax; default: the environment
// variable, else the defaults), on the host emulation of device memory or, with
// --device=cuda:N, on that GPU. Prints one row per trace (--json: an array); errors go
// to stderr, and nothing goes to stdout when no trace could be replayed. With one trace,
// --timeline=PATH writes the replay's memory profile as Chrome trace JSON and
// --picture=PATH draws it as a PNG (genesis/profiler). Returns 0, 1 if a trace could not
// be read or replayed (or its profile written), 2 for bad usage (including unwritable
// --timeline / --picture paths, checked before replaying).
int RunReplay(absl::Span<const std::string> args);

}  // namespace genesis::cli

#endif  // GENESIS_TOOLS_GENESIS_REPLAY_COMMAND_H_
