#include "genesis/profiler/tick_clock.h"

#include <chrono>

namespace genesis::profiler {

int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

TickClock::TickClock(int64_t period_ns) : now_(SteadyNowNs()) {
  thread_ = std::thread([this, period_ns] { Run(period_ns); });
}

TickClock::~TickClock() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void TickClock::Run(int64_t period_ns) {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::nanoseconds(period_ns), [this] { return stop_; });
    now_.store(SteadyNowNs(), std::memory_order_relaxed);
  }
}

}  // namespace genesis::profiler
