// TickClock: a steady-clock time that costs one load to read.
//
// Reading steady_clock costs ~30 ns on common x86 machines (rdtsc alone ~11 ns), more
// than a cached allocate+free pair. A TickClock's thread stores the steady-clock time
// every `period`; Now() reads the last value, late by at most a period (plus
// scheduling delay). Used for the pool's fast-path events.
#ifndef GENESIS_PROFILER_TICK_CLOCK_H_
#define GENESIS_PROFILER_TICK_CLOCK_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace genesis::profiler {

// steady_clock::now() in nanoseconds.
int64_t SteadyNowNs();

class TickClock {
 public:
  // Starts the ticking thread; `period_ns` > 0.
  explicit TickClock(int64_t period_ns);
  // Stops and joins the thread.
  ~TickClock();
  TickClock(const TickClock&) = delete;
  TickClock& operator=(const TickClock&) = delete;

  // The steady-clock time of the last tick (never before construction).
  int64_t Now() const { return now_.load(std::memory_order_relaxed); }
  // The value Now() reads, for readers that load it themselves; valid while this lives.
  const std::atomic<int64_t>* source() const { return &now_; }

 private:
  void Run(int64_t period_ns);

  alignas(64) std::atomic<int64_t> now_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace genesis::profiler

#endif  // GENESIS_PROFILER_TICK_CLOCK_H_
