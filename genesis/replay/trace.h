// Allocation traces: what a program asked of its memory pool, one event a line,
// so that the same sequence can be replayed through any pool configuration
// (replayer.h) to measure fragmentation and backend traffic.
//
// The text format is PyTorch's device trace (torch.cuda.memory._snapshot()
// ["device_traces"], as tools/record_torch_trace.py writes it):
//
//   # comment (a whole line, or the rest of a line after '#')
//   alloc          0x7f19bc000000 154389504 0
//   free_requested 0x7f19bc000000 154389504 0
//   free_completed 0x7f19bc000000 154389504 0
//
//   # step 2
//
// Fields are separated by spaces or tabs: <action> <address> <size> <stream>.
// The address is hex ("0x...") or decimal, the size decimal bytes, the stream
// decimal or hex. A block is live from its `alloc` to its `free_completed`;
// `free_requested` (the caller's free, before stream work on the block
// finished) is checked but changes nothing. Files may be gzip-compressed
// (recognised by their magic bytes, whatever their name). A comment line that is
// exactly "# step <n>" (n a decimal integer >= 0) marks where step n of the
// program's work (a training step) begins; events before the first marker belong
// to step 0 (setup). Markers let a replay report each step on its own.
#ifndef GENESIS_REPLAY_TRACE_H_
#define GENESIS_REPLAY_TRACE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace genesis::replay {

enum class TraceAction { kAlloc, kFreeRequested, kFreeCompleted };

// "alloc", "free_requested", "free_completed".
std::string_view TraceActionName(TraceAction action);

struct TraceEvent {
  TraceAction action = TraceAction::kAlloc;
  uint64_t address = 0;
  // Bytes asked for (alloc); for frees, the block's size or 0 for "not
  // recorded".
  uint64_t size = 0;
  uint64_t stream = 0;
  // 1-based line in the trace text; 0 for events made in code.
  int line = 0;
  // The step (from the last "# step <n>" line before it) the event belongs to.
  int step = 0;
};

// Sizes above this (1 PiB) are rejected as absurd: no device has that much
// memory, and such a value is a sign of a corrupt or misparsed trace.
inline constexpr uint64_t kMaxTraceEventSize = uint64_t{1} << 50;

// Parses trace text (see the top of this file). `name` (a path, usually) only
// appears in error messages. Returns the events in order, each with its line
// number, or InvalidArgument "<name>:<line>: <what>" for the first bad line:
//   * an unknown action (named), a wrong number of fields, a number that does
//   not
//     parse (named), a negative size, a size above kMaxTraceEventSize;
//   * an alloc of an address that is still live (with the line of its alloc);
//   * a free_requested or free_completed of an address that is not live, or
//   whose
//     non-zero size differs from the size of its alloc.
// A size of 0 is accepted (PyTorch never records one, a pool gives a minimum
// block), and so is a free_completed without a free_requested (some traces lack
// them).
absl::StatusOr<std::vector<TraceEvent>> ParseTrace(std::string_view text,
                                                   std::string_view name);

// Reads and parses the trace file at `path`, plain or gzip (several
// concatenated gzip members are read as one stream). NotFound if the file
// cannot be opened, DataLoss for a truncated or corrupt gzip stream, each
// naming `path`; parse errors as ParseTrace with `path` as the name.
absl::StatusOr<std::vector<TraceEvent>> ReadTrace(const std::string &path);

// The trace as text, one line per event, that ParseTrace reads back to the same
// actions, addresses, sizes and streams (line numbers become 1, 2, ...).
// Addresses are written in hex, sizes and streams in decimal. A "# step <n>"
// line goes before the first event of each step other than step 0.
std::string FormatTrace(const std::vector<TraceEvent> &events);

// Writes FormatTrace(events) to `path`, gzip-compressed if `gzip`. Replaces the
// file. An error (naming `path`) if it cannot be created or written completely.
absl::Status WriteTrace(const std::string &path, const std::vector<TraceEvent> &events,
                        bool gzip);

// What a trace does, as the trace itself saw it (requested sizes, before any
// pool rounding).
struct TraceSummary {
  int64_t num_allocs = 0;
  int64_t num_free_requested = 0;
  // free_completed events: blocks actually freed.
  int64_t num_frees = 0;
  // Distinct stream values of all events.
  int64_t num_streams = 0;
  // Highest sum of live block sizes: a lower bound for any pool's peak
  // allocated bytes.
  uint64_t peak_live_bytes = 0;
  // Sum of all alloc sizes.
  uint64_t total_allocated_bytes = 0;
  // Distinct steps (see TraceEvent::step) that have events; 1 for a trace without
  // step markers.
  int num_steps = 0;
  // Blocks (and their bytes) still live after the last event.
  int64_t live_blocks_at_end = 0;
  uint64_t live_bytes_at_end = 0;
};

// Summarises `events`, which should be valid (as ParseTrace returns them):
// frees of addresses that are not live are ignored, a second alloc of a live
// address replaces it.
TraceSummary SummarizeTrace(const std::vector<TraceEvent> &events);

}  // namespace genesis::replay

#endif  // GENESIS_REPLAY_TRACE_H_
