#include "genesis/memory/pool/pending_frees.h"

#include <atomic>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "genesis/core/status.h"

namespace genesis::memory::pool_internal {

PendingFrees::PendingFrees(StreamEvents* events) : events_(events) {}

absl::StatusOr<std::vector<EventId>> PendingFrees::RecordEvents(const Block& b) {
  std::vector<EventId> recorded;
  for (StreamId s : b.recorded_streams) {
    absl::StatusOr<EventId> e = events_->Record(s);
    if (!e.ok()) {
      for (EventId id : recorded) events_->Release(id);
      return Annotate(e.status(), absl::StrFormat(
                                      "Free(%p): recording an event on stream %#x",
                                      static_cast<const void*>(b.ptr), s));
    }
    recorded.push_back(*e);
  }
  return recorded;
}

void PendingFrees::Add(Block* b, const std::vector<EventId>& events) {
  b->state.store(State::kPending, std::memory_order_relaxed);
  b->pending_events = static_cast<int>(events.size());
  for (EventId id : events) pending_.push_back({id, b});
}

absl::Status PendingFrees::Process(bool wait, absl::FunctionRef<void(Block*)> done_with) {
  if (pending_.empty()) return absl::OkStatus();
  absl::Status status;
  std::vector<std::pair<EventId, Block*>> still;
  for (auto& [event, block] : pending_) {
    bool done = false;
    if (status.ok()) {
      if (wait) {
        status = events_->Synchronize(event);
        done = status.ok();
      } else {
        absl::StatusOr<bool> q = events_->Query(event);
        if (q.ok()) {
          done = *q;
        } else {
          status = q.status();
        }
      }
    }
    if (!done) {
      still.push_back({event, block});
      continue;
    }
    events_->Release(event);
    if (--block->pending_events == 0) done_with(block);
  }
  pending_ = std::move(still);
  return status;
}

void PendingFrees::WaitAll() {
  for (auto& [event, block] : pending_) {
    (void)events_->Synchronize(event);
    events_->Release(event);
  }
  pending_.clear();
}

}  // namespace genesis::memory::pool_internal
