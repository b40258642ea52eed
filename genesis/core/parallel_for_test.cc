#include "genesis/core/parallel_for.h"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace genesis {
namespace {

TEST(ParallelForTest, RunsEveryPartOnceAndPartZeroOnTheCaller) {
  for (const int parts : {1, 2, 3, 8, 64}) {
    std::vector<int> runs(parts, 0);  // Each part writes its own slot.
    std::thread::id first;
    ParallelFor(parts, [&](int i) {
      ++runs[i];
      if (i == 0) first = std::this_thread::get_id();
    });
    // Every write is visible once ParallelFor has returned.
    for (int i = 0; i < parts; ++i) EXPECT_EQ(runs[i], 1) << "part " << i << " of " << parts;
    EXPECT_EQ(first, std::this_thread::get_id());
  }
}

TEST(ParallelForTest, NoPartsRunsNothing) {
  int runs = 0;
  ParallelFor(0, [&](int) { ++runs; });
  ParallelFor(-3, [&](int) { ++runs; });
  EXPECT_EQ(runs, 0);
}

TEST(ParallelForTest, PartsRunOnOtherThreadsWhereThereAreCores) {
  if (HardwareThreads() < 2) GTEST_SKIP() << "one hardware thread";
  // Part 0 waits until another part has started: only another thread can start it.
  std::atomic<bool> other_started{false};
  std::set<std::thread::id> ids;
  std::mutex mu;
  ParallelFor(2, [&](int i) {
    {
      std::lock_guard<std::mutex> lock(mu);
      ids.insert(std::this_thread::get_id());
    }
    if (i == 1) other_started = true;
    if (i == 0) {
      while (!other_started) std::this_thread::yield();
    }
  });
  EXPECT_TRUE(other_started);
  EXPECT_EQ(ids.size(), 2u);
}

TEST(ParallelForTest, ConcurrentAndNestedCallsFinish) {
  constexpr int kCallers = 4;
  constexpr int kParts = 8;
  std::vector<std::vector<int>> sums(kCallers, std::vector<int>(kParts, 0));
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int round = 0; round < 50; ++round) {
        ParallelFor(kParts, [&](int i) {
          // A nested call inside each part.
          std::atomic<int> inner{0};
          ParallelFor(3, [&](int) { inner.fetch_add(1); });
          sums[c][i] += inner.load();
        });
      }
    });
  }
  for (std::thread& t : callers) t.join();
  for (int c = 0; c < kCallers; ++c) {
    for (int i = 0; i < kParts; ++i) EXPECT_EQ(sums[c][i], 150) << c << ", " << i;
  }
}

TEST(ParallelForTest, HardwareThreadsIsPositive) { EXPECT_GE(HardwareThreads(), 1); }

// Forks 20 children, each of which must finish three ParallelFor calls of 4 parts (on
// other threads where there are cores) within its own process.
void ExpectForkedChildrenFinish() {
  for (int round = 0; round < 20; ++round) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      std::atomic<int> sum{0};
      for (int call = 0; call < 3; ++call) {
        ParallelFor(4, [&](int i) { sum.fetch_add(i + 1); });
        // Past the workers' spin: the next call wakes them.
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      _exit(sum.load() == 30 ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "round " << round;
  }
}

// Children forked while the parent's workers sleep (waiting for work), and while they run
// parts of other calls, get workers of their own. With the parent's lock and condition
// variables inherited as they were, children hung: on the lock held at the fork (1 of 3
// runs on two cores), and on condition variables with the parent's sleeping workers
// counted as waiters (every run on 32 cores).
TEST(ParallelForTest, ForkedChildrenRunTheirOwnParts) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer does not support new threads after a multi-threaded fork";
#endif
  ParallelFor(4, [](int) {});
  // Past the workers' spin: they sleep.
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ExpectForkedChildrenFinish();
  std::atomic<bool> stop{false};
  std::thread busy([&] {
    while (!stop) ParallelFor(4, [](int) { std::this_thread::yield(); });
  });
  ExpectForkedChildrenFinish();
  stop = true;
  busy.join();
}

}  // namespace
}  // namespace genesis
