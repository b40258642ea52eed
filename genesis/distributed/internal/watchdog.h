// Watchdog: polls the operations in flight of a backend whose states are polled (GPU
// work), so that an operation that cannot finish becomes an error even when nobody
// waits for it (the state's Progress decides when: NCCL's fails its group past the
// group's timeout).
//
// A watched state lives in an intrusive list, in issue order, from Watch until its last
// reference goes: the deleter of the shared_ptr that Watch returns takes it out of the
// list before deleting it. So watching costs an operation a lock and a few pointers at
// each end, a dropped operation leaves the list at once, and a sweep looks at live
// operations only: of each stream's, at the first unfinished one, since the operations
// of one stream finish in the order they were issued.
//
//   std::shared_ptr<MyState> state = watchdog.Watch(std::make_unique<MyState>(...), stream);
//
// (A queue of weak references instead made every operation release, on the issuing
// thread, references the watchdog's thread had touched last, and made each sweep visit
// every operation issued since the last one, thousands under a stream of small
// collectives: docs/distributed.md, "The host path of an operation".)
#ifndef GENESIS_DISTRIBUTED_INTERNAL_WATCHDOG_H_
#define GENESIS_DISTRIBUTED_INTERNAL_WATCHDOG_H_

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/time/time.h"
#include "genesis/distributed/internal/work_state.h"

namespace genesis::distributed::internal {

class Watchdog;

// The base of a state a Watchdog can watch, beside WorkState: the list's links, under
// the watchdog's lock.
class Watched {
 public:
  Watched() = default;
  Watched(const Watched&) = delete;
  Watched& operator=(const Watched&) = delete;

 protected:
  ~Watched() = default;

 private:
  friend class Watchdog;
  WorkState* state_ = nullptr;
  std::weak_ptr<WorkState> self_;  // For a sweep to keep it alive while it polls it.
  const void* stream_ = nullptr;
  Watched* prev_ = nullptr;
  Watched* next_ = nullptr;
};

class Watchdog {
 public:
  // Starts the thread that sweeps every `period`.
  explicit Watchdog(absl::Duration period);
  // Stops the thread. Every state it watched must be gone by then.
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Takes `state` (a polled WorkState that is also Watched) and watches it until its
  // last reference goes; `stream` names the order it finishes in (states of one stream
  // finish in the order they were watched). The returned pointer's deleter stops
  // watching it, then deletes it, on whichever thread drops the last reference.
  template <typename T>
  std::shared_ptr<T> Watch(std::unique_ptr<T> state, const void* stream) {
    T* raw = state.release();
    std::shared_ptr<T> shared(raw, [this](T* s) {
      Unwatch(s);
      delete s;
    });
    Watched* node = raw;
    node->state_ = raw;
    node->self_ = shared;
    node->stream_ = stream;
    Link(node);
    return shared;
  }

  // How many states are watched now (for tests).
  size_t watched() const;

 private:
  void Link(Watched* node);
  void Unwatch(Watched* node);
  void Run();

  const absl::Duration period_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;    // Under mu_.
  Watched* head_ = nullptr;  // Under mu_: the oldest watched state.
  Watched* tail_ = nullptr;  // Under mu_: the newest.
  size_t count_ = 0;         // Under mu_.
  std::thread thread_;
};

}  // namespace genesis::distributed::internal

#endif  // GENESIS_DISTRIBUTED_INTERNAL_WATCHDOG_H_
