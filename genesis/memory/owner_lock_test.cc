#include "genesis/memory/owner_lock.h"

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace genesis::memory {
namespace {

// A counter and a mirror that are only consistent if every increment of both happens
// under the lock; plain (non-atomic) variables, so tsan also sees any missing order.
struct Guarded {
  int64_t count = 0;
  int64_t mirror = 0;
};

// `rounds` times, as another thread: takes `lock`, notes in `torn` whether `g` was
// inconsistent, and adds 2 to both of its figures.
void AddTwoAsOther(OwnerLock& lock, Guarded& g, std::atomic<bool>& torn, int rounds) {
  for (int i = 0; i < rounds; ++i) {
    lock.Lock();
    if (g.count != g.mirror) torn = true;
    g.count += 2;
    g.mirror += 2;
    lock.Unlock();
  }
}

TEST(OwnerLockTest, OwnerAndOthersExcludeEachOther) {
  constexpr int kOwnerRounds = 400000;
  constexpr int kOtherRounds = 2000;
  constexpr int kOthers = 3;
  OwnerLock lock;
  Guarded g;
  std::atomic<bool> torn{false};
  std::thread owner([&] {
    for (int i = 0; i < kOwnerRounds; ++i) {
      OwnerLock::AsOwner hold(lock);
      if (g.count != g.mirror) torn = true;
      ++g.count;
      ++g.mirror;
    }
  });
  std::vector<std::thread> others;
  for (int t = 0; t < kOthers; ++t) {
    others.emplace_back([&] { AddTwoAsOther(lock, g, torn, kOtherRounds); });
  }
  owner.join();
  for (std::thread& t : others) t.join();
  EXPECT_FALSE(torn.load());
  EXPECT_EQ(g.count, kOwnerRounds + 2 * kOthers * kOtherRounds);
  EXPECT_EQ(g.mirror, g.count);
}

// TryLockAsOwner takes a free lock, and gives up at once (not holding it) while another
// thread holds it; under contention the owner's tries and the others' locks still
// exclude each other.
TEST(OwnerLockTest, TryLockAsOwnerNeverWaits) {
  OwnerLock lock;
  ASSERT_TRUE(lock.TryLockAsOwner());
  lock.UnlockAsOwner();
  lock.Lock();
  EXPECT_FALSE(lock.TryLockAsOwner());
  lock.Unlock();
  EXPECT_TRUE(lock.TryLockAsOwner());
  lock.UnlockAsOwner();

  constexpr int kOwnerRounds = 400000;
  constexpr int kOtherRounds = 2000;
  Guarded g;
  std::atomic<bool> torn{false};
  int64_t owner_added = 0;  // The owner's thread alone.
  std::thread owner([&] {
    for (int i = 0; i < kOwnerRounds; ++i) {
      if (!lock.TryLockAsOwner()) continue;
      if (g.count != g.mirror) torn = true;
      ++g.count;
      ++g.mirror;
      ++owner_added;
      lock.UnlockAsOwner();
    }
  });
  std::thread other([&] { AddTwoAsOther(lock, g, torn, kOtherRounds); });
  owner.join();
  other.join();
  EXPECT_FALSE(torn.load());
  EXPECT_EQ(g.count, owner_added + 2 * kOtherRounds);
  EXPECT_EQ(g.mirror, g.count);
}

TEST(OwnerLockTest, LockAllHoldsEveryOwnerOff) {
  constexpr int kOwners = 4;
  constexpr int kRounds = 100000;
  OwnerLock locks[kOwners];
  Guarded g[kOwners];
  std::atomic<bool> stop{false};
  std::vector<std::thread> owners;
  for (int o = 0; o < kOwners; ++o) {
    owners.emplace_back([&, o] {
      for (int i = 0; i < kRounds; ++i) {
        OwnerLock::AsOwner hold(locks[o]);
        ++g[o].count;
        ++g[o].mirror;
      }
    });
  }
  std::vector<OwnerLock*> all;
  for (OwnerLock& l : locks) all.push_back(&l);
  int64_t sweeps = 0;
  bool consistent = true;
  for (int i = 0; i < 500; ++i) {
    OwnerLock::LockAll(all);
    for (const Guarded& x : g) consistent = consistent && x.count == x.mirror;
    OwnerLock::UnlockAll(all);
    ++sweeps;
  }
  for (std::thread& t : owners) t.join();
  EXPECT_TRUE(consistent);
  EXPECT_EQ(sweeps, 500);
  for (const Guarded& x : g) EXPECT_EQ(x.count, kRounds);
}

TEST(OwnerLockTest, OwnerMayTakeTheOtherSideWhenNotHoldingIt) {
  OwnerLock lock;
  { OwnerLock::AsOwner hold(lock); }
  lock.Lock();  // The owner thread acting as another thread (a flush it asked for).
  lock.Unlock();
  OwnerLock::AsOwner again(lock);
  SUCCEED();
}

}  // namespace
}  // namespace genesis::memory
