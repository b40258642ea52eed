// The watchdog on states that the test finishes by hand: which states a sweep polls
// (the first unfinished one of each stream), that a dropped state leaves at once, that
// held states which completed are all finished within a sweep or two, that a state
// dropped while a sweep polls it goes safely, and many threads watching and dropping
// at once (run under tsan and asan in CI).
#include "genesis/distributed/internal/watchdog.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace genesis::distributed::internal {
namespace {

// A polled state that completes when the test says so; counts its polls and its end.
class FakeState final : public WorkState, public Watched {
 public:
  explicit FakeState(std::atomic<int>* destroyed = nullptr)
      : WorkState("fake", Kind::kPolled), destroyed_(destroyed) {}
  ~FakeState() override {
    if (destroyed_ != nullptr) destroyed_->fetch_add(1);
  }

  void Complete() { complete_.store(true); }
  int polls() const { return polls_.load(); }
  // From now on a poll waits until `*open` (a slow device query), saying it is polling.
  void Gate(std::atomic<bool>* open) { gate_.store(open); }
  bool polling() const { return polling_.load(); }

 protected:
  void Progress() override {
    polls_.fetch_add(1);
    if (std::atomic<bool>* open = gate_.load()) {
      polling_.store(true);
      while (!open->load()) std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    if (complete_.load()) Finish(absl::OkStatus());
  }

 private:
  std::atomic<int>* destroyed_;
  std::atomic<bool> complete_{false};
  std::atomic<int> polls_{0};
  std::atomic<std::atomic<bool>*> gate_{nullptr};
  std::atomic<bool> polling_{false};
};

constexpr absl::Duration kPeriod = absl::Milliseconds(1);

// Waits up to 10 s for `condition`.
template <typename F>
bool Eventually(F condition) {
  const absl::Time until = absl::Now() + absl::Seconds(10);
  while (!condition()) {
    if (absl::Now() > until) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

// Two streams, by address.
const int kStreamA = 1;
const int kStreamB = 2;

TEST(WatchdogTest, PollsTheFirstUnfinishedStateOfEachStream) {
  Watchdog watchdog(kPeriod);
  auto a1 = watchdog.Watch(std::make_unique<FakeState>(), &kStreamA);
  auto a2 = watchdog.Watch(std::make_unique<FakeState>(), &kStreamA);
  auto b1 = watchdog.Watch(std::make_unique<FakeState>(), &kStreamB);
  EXPECT_EQ(watchdog.watched(), 3u);
  ASSERT_TRUE(Eventually([&] { return a1->polls() > 3 && b1->polls() > 3; }));
  // a2 is behind a1 on its stream: never polled while a1 runs.
  EXPECT_EQ(a2->polls(), 0);
  a1->Complete();
  ASSERT_TRUE(Eventually([&] { return a1->Finished() && a2->polls() > 0; }));
  EXPECT_TRUE(a1->result().ok());
  EXPECT_FALSE(a2->Finished());
  EXPECT_FALSE(b1->Finished());
}

TEST(WatchdogTest, ADroppedStateLeavesAtOnce) {
  Watchdog watchdog(absl::Hours(1));  // No sweep during the test.
  std::atomic<int> destroyed{0};
  {
    auto held = watchdog.Watch(std::make_unique<FakeState>(&destroyed), &kStreamA);
    for (int i = 0; i < 1000; ++i) {
      auto dropped = watchdog.Watch(std::make_unique<FakeState>(&destroyed), &kStreamA);
    }
    EXPECT_EQ(destroyed.load(), 1000);
    EXPECT_EQ(watchdog.watched(), 1u);
  }
  EXPECT_EQ(destroyed.load(), 1001);
  EXPECT_EQ(watchdog.watched(), 0u);
}

TEST(WatchdogTest, HeldStatesThatCompletedAreFinishedWithoutAWaiter) {
  Watchdog watchdog(kPeriod);
  std::vector<std::shared_ptr<FakeState>> held;
  for (int i = 0; i < 100; ++i) {
    held.push_back(watchdog.Watch(std::make_unique<FakeState>(), &kStreamA));
  }
  for (const auto& s : held) s->Complete();
  ASSERT_TRUE(Eventually([&] {
    for (const auto& s : held) {
      if (!s->Finished()) return false;
    }
    return true;
  }));
  for (const auto& s : held) EXPECT_TRUE(s->result().ok());
}

TEST(WatchdogTest, AStateDroppedWhileASweepPollsItGoesAfterThePoll) {
  Watchdog watchdog(kPeriod);
  std::atomic<int> destroyed{0};
  std::atomic<bool> open{false};
  auto state = watchdog.Watch(std::make_unique<FakeState>(&destroyed), &kStreamA);
  state->Gate(&open);
  ASSERT_TRUE(Eventually([&] { return state->polling(); }));
  // Mid-poll: the sweep holds a reference, so dropping the last one of the test's does
  // not destroy it; the state goes when the poll returns, on the watchdog's thread.
  state.reset();
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(destroyed.load(), 0);
  EXPECT_EQ(watchdog.watched(), 1u);
  open.store(true);
  ASSERT_TRUE(Eventually([&] { return destroyed.load() == 1; }));
  EXPECT_EQ(watchdog.watched(), 0u);
}

TEST(WatchdogTest, ManyThreadsWatchAndDropWhileItSweeps) {
  Watchdog watchdog(absl::Microseconds(200));
  std::atomic<int> destroyed{0};
  constexpr int kThreads = 4;
  constexpr int kStates = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::shared_ptr<FakeState>> held;  // Its address names the stream.
      for (int i = 0; i < kStates; ++i) {
        auto s = watchdog.Watch(std::make_unique<FakeState>(&destroyed), &held);
        if (i % 3 == 0) s->Complete();
        if (i % 50 == 0) held.push_back(s);  // Some kept for a while, the rest dropped.
        if (held.size() > 20) held.erase(held.begin());
      }
      for (const auto& s : held) s->Complete();
      ASSERT_TRUE(Eventually([&] {
        for (const auto& s : held) {
          if (!s->Finished()) return false;
        }
        return true;
      })) << "thread "
          << t;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(destroyed.load(), kThreads * kStates);
  EXPECT_EQ(watchdog.watched(), 0u);
}

}  // namespace
}  // namespace genesis::distributed::internal
