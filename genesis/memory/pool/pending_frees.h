// Frees that wait for other streams: a block freed after RecordStream named streams
// besides its own records one event per stream and stays pending (active, not
// allocated, not reusable) until every one has completed. Events are polled at the
// start of every slow-path allocation and by EmptyCache; Compact, the OOM path and the
// pool's destruction wait for them. All under the pool lock.
#ifndef GENESIS_MEMORY_POOL_PENDING_FREES_H_
#define GENESIS_MEMORY_POOL_PENDING_FREES_H_

#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "genesis/memory/pool/block.h"
#include "genesis/memory/stream_events.h"

namespace genesis::memory::pool_internal {

class PendingFrees {
 public:
  // `events` (null for a pool without StreamEvents; then no block has recorded
  // streams) must outlive this.
  explicit PendingFrees(StreamEvents* events);
  PendingFrees(const PendingFrees&) = delete;
  PendingFrees& operator=(const PendingFrees&) = delete;

  // Records an event on each of b's recorded streams and returns them (none if it has
  // none). On an error, releases the events recorded so far and returns it annotated
  // with the block and stream; the block is unchanged.
  absl::StatusOr<std::vector<EventId>> RecordEvents(const Block& b);
  // Marks `b` kPending until all of `events` (not empty) complete.
  void Add(Block* b, const std::vector<EventId>& events);

  // Retires completed events (with `wait`, waiting for each), and calls `done` for
  // each block whose last event has completed. After an error (returned) the remaining
  // events are kept unasked.
  absl::Status Process(bool wait, absl::FunctionRef<void(Block*)> done);
  // Waits for every event (errors ignored) and releases it, forgetting the blocks
  // (destruction).
  void WaitAll();

 private:
  StreamEvents* const events_;
  std::vector<std::pair<EventId, Block*>> pending_;
};

}  // namespace genesis::memory::pool_internal

#endif  // GENESIS_MEMORY_POOL_PENDING_FREES_H_
