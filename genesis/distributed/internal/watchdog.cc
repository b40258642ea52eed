#include "genesis/distributed/internal/watchdog.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace genesis::distributed::internal {

Watchdog::Watchdog(absl::Duration period) : period_(period), thread_([this] { Run(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

size_t Watchdog::watched() const {
  std::lock_guard<std::mutex> lock(mu_);
  return count_;
}

void Watchdog::Link(Watched* node) {
  std::lock_guard<std::mutex> lock(mu_);
  node->prev_ = tail_;
  node->next_ = nullptr;
  if (tail_ != nullptr) {
    tail_->next_ = node;
  } else {
    head_ = node;
  }
  tail_ = node;
  ++count_;
}

void Watchdog::Unwatch(Watched* node) {
  std::lock_guard<std::mutex> lock(mu_);
  if (node->prev_ != nullptr) {
    node->prev_->next_ = node->next_;
  } else {
    head_ = node->next_;
  }
  if (node->next_ != nullptr) {
    node->next_->prev_ = node->prev_;
  } else {
    tail_ = node->prev_;
  }
  node->prev_ = node->next_ = nullptr;
  --count_;
}

// Every period: under the lock, walks the live states in issue order and takes a
// reference to the first unfinished one of each stream (the later ones of a stream
// cannot have finished before it, and their timeouts follow from its); then, off the
// lock, polls those (Progress may query the device, fail a group, or release what the
// state kept alive, none of which may run under the lock that every operation takes).
// A state that finished lets the next one of its stream be polled in the same sweep,
// for up to kRounds rounds (the rest waits for the next sweep, so that a stream of held
// operations that finish as fast as they come cannot keep the sweep going). If its
// owner dropped a state meanwhile, the reference taken here is the last, and the state
// goes on this thread.
void Watchdog::Run() {
  constexpr int kRounds = 16;
  std::vector<std::shared_ptr<WorkState>> due;
  std::vector<const void*> streams;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, absl::ToChronoNanoseconds(period_));
    bool finished_some = true;
    for (int round = 0; round < kRounds && finished_some && !stopping_; ++round) {
      finished_some = false;
      streams.clear();
      for (Watched* node = head_; node != nullptr; node = node->next_) {
        if (node->state_->Finished()) continue;
        if (std::find(streams.begin(), streams.end(), node->stream_) != streams.end()) continue;
        streams.push_back(node->stream_);
        // Null while its deleter waits for the lock to take it out of the list.
        if (std::shared_ptr<WorkState> state = node->self_.lock()) due.push_back(std::move(state));
      }
      lock.unlock();
      for (const std::shared_ptr<WorkState>& state : due) {
        if (state->Done()) finished_some = true;
      }
      due.clear();
      lock.lock();
    }
  }
}

}  // namespace genesis::distributed::internal
