#include "genesis/distributed/internal/work_state.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "absl/time/clock.h"

namespace genesis::distributed::internal {

bool LookBeforeSleeping() {
  static const bool look = std::thread::hardware_concurrency() >= 8;
  return look;
}

WorkState::WorkState(std::string description, Kind kind)
    : description_(std::move(description)), kind_(kind) {}

WorkState::~WorkState() = default;

bool WorkState::Done() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_ || kind_ == Kind::kCompleted) return done_;
  }
  Progress();
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

bool WorkState::WaitUntil(absl::Time deadline) {
  if (kind_ == Kind::kCompleted) {
    // Not started yet: the waiter runs it itself, with no hand-off either way.
    if (!finished_.load(std::memory_order_acquire) && RunHere(deadline)) return true;
    // Another thread finishes it (Gloo's worker), often within microseconds: look for a
    // little while before sleeping, since waking a sleeping thread costs about as much.
    if (LookBeforeSleeping()) {
      const absl::Time look_until = std::min(deadline, absl::Now() + absl::Microseconds(50));
      while (!finished_.load(std::memory_order_acquire) && absl::Now() < look_until) {
        std::this_thread::yield();
      }
    }
    std::unique_lock<std::mutex> lock(mu_);
    while (!done_) {
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) return false;
      // Bounded waits so that an infinite deadline does not overflow the clock.
      cv_.wait_for(lock, absl::ToChronoMilliseconds(std::min(left, absl::Seconds(1))) +
                             std::chrono::milliseconds(1));
    }
    return true;
  }
  // Polled: look without sleeping (yielding the core to whoever wants it) for up to
  // kLookFor, then back off to short sleeps. A sleep of 50 us takes 50 - 100 us with
  // Linux's timer slack, which a wait for milliseconds of GPU collectives paid at its
  // end when it outlasted a fixed 2,000 looks (about 3 ms of event queries): 20
  // back-to-back collectives of 16 to 64 MiB read 0.94 - 0.99 of NCCL waited for with
  // cudaStreamSynchronize (which spins), and 0.99 - 1.01 with this
  // (docs/distributed.md, "Waiting for an operation"). On machines of few cores it
  // looks 2,000 times, as it did.
  constexpr absl::Duration kLookFor = absl::Milliseconds(100);
  const absl::Time look_until =
      LookBeforeSleeping() ? std::min(deadline, absl::Now() + kLookFor) : absl::InfinitePast();
  for (int looks = 0;; ++looks) {
    if (Done()) return true;
    const absl::Time now = absl::Now();
    if (now >= deadline) return false;
    if (now < look_until || looks < 2000) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

absl::Status WorkState::result() {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

void WorkState::Finish(absl::Status status) {
  absl::InlinedVector<std::shared_ptr<const void>, 2> released;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return;
    done_ = true;
    finished_.store(true, std::memory_order_release);
    status_ = std::move(status);
    released.swap(retained_);
  }
  cv_.notify_all();
  // `released` goes here, outside the lock: dropping a storage may return memory to a
  // pool, which must not run under our mutex.
}

void WorkState::Retain(std::shared_ptr<const void> object) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!done_) retained_.push_back(std::move(object));
}

}  // namespace genesis::distributed::internal
