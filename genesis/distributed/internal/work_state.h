// The shared state behind a Work: how backends complete an operation.
//
// A state completes in one of two ways. Completed states are finished by another
// thread (Gloo's worker) through Finish. Polled states (GPU work) override Progress,
// which checks once whether the operation has finished (an event query, NCCL's
// asynchronous error) and calls Finish if so; waiting on them polls.
#ifndef GENESIS_DISTRIBUTED_INTERNAL_WORK_STATE_H_
#define GENESIS_DISTRIBUTED_INTERNAL_WORK_STATE_H_

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/time/time.h"

namespace genesis::distributed::internal {

// Whether a thread about to sleep until another one hands it something may first look
// for it for a little while (yielding): only on machines with cores to spare (8 or
// more), where waking a sleeping thread costs more than looking. On a few cores the
// looking takes the CPU from the very threads it waits for.
bool LookBeforeSleeping();

class WorkState {
 public:
  enum class Kind { kCompleted, kPolled };

  WorkState(std::string description, Kind kind);
  virtual ~WorkState();
  WorkState(const WorkState&) = delete;
  WorkState& operator=(const WorkState&) = delete;

  // What the operation is, for messages: the text given to the constructor, unless a
  // backend formats it on demand (so that an operation costs no formatting unless an
  // error or a caller asks).
  virtual std::string description() const { return description_; }

  // True once finished. For polled states, checks once.
  bool Done();

  // True once finished; never checks (for a watchdog that looks at many states).
  bool Finished() const { return finished_.load(std::memory_order_acquire); }

  // Blocks until finished or `deadline`; returns whether it finished.
  bool WaitUntil(absl::Time deadline);

  // How it ended; only meaningful once Done().
  absl::Status result();

  // Ends the operation with `status` (the first call wins), releases what it kept
  // alive and wakes the waiters.
  void Finish(absl::Status status);

  // Keeps `object` alive until the operation has finished (at once if it has).
  void Retain(std::shared_ptr<const void> object);

 protected:
  // Polled states: checks whether the operation has finished and calls Finish if so.
  virtual void Progress() {}
  // Completed states: runs the operation on the calling thread, a waiter with time until
  // `deadline`, if it has not started and nothing is before it (rather than sleeping
  // until another thread has run it), and finishes the state; returns whether it did.
  virtual bool RunHere(absl::Time deadline) {
    (void)deadline;
    return false;
  }

 private:
  const std::string description_;
  const Kind kind_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  // done_, readable without mu_ by a waiter that looks before it sleeps.
  std::atomic<bool> finished_{false};
  absl::Status status_;
  // Inline: an operation retains one or two objects, and a vector allocated for them on
  // every operation.
  absl::InlinedVector<std::shared_ptr<const void>, 2> retained_;
};

}  // namespace genesis::distributed::internal

#endif  // GENESIS_DISTRIBUTED_INTERNAL_WORK_STATE_H_
