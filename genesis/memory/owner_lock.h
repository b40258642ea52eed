// OwnerLock: a lock whose owner thread takes it without an atomic read-modify-write.
//
// A pool's thread cache is used on every allocation by the one thread that owns it,
// and only rarely by others (a flush, statistics). A spin lock costs the owner two
// locked instructions per allocate+free pair, which on some CPUs is most of the pair's
// cost. OwnerLock lets the owner announce itself with a plain store and check for
// others with a plain load (a Dekker handshake). The rare other side pays instead: it
// forces a memory barrier on every running thread of the process with membarrier(2)
// (MEMBARRIER_CMD_PRIVATE_EXPEDITED), which orders the owner's store before its load
// wherever the owner is. Where membarrier is not available (old kernels, seccomp
// filters) and under ThreadSanitizer, the owner uses a sequentially consistent
// exchange instead, and the other side a sequentially consistent store: the same
// handshake with the fences on the owner's side, which tsan can follow.
//
//   OwnerLock lock;              // Created by, or for, the owner thread.
//   lock.LockAsOwner();   ...   lock.UnlockAsOwner();   // On the owner thread only.
//   lock.Lock();          ...   lock.Unlock();          // Any thread, not as owner.
//
// Mutual exclusion holds between the owner and every other thread, and among the
// others (they queue on a mutex). The owner backs off while another thread holds or
// waits for the lock. Sections under LockAsOwner must not block on other threads.
#ifndef GENESIS_MEMORY_OWNER_LOCK_H_
#define GENESIS_MEMORY_OWNER_LOCK_H_

#include <atomic>
#include <mutex>

#include "absl/types/span.h"

namespace genesis::memory {

class OwnerLock {
 public:
  // Registers the process for membarrier on first use (once per process).
  OwnerLock();
  OwnerLock(const OwnerLock&) = delete;
  OwnerLock& operator=(const OwnerLock&) = delete;

  // Owner thread only; returns holding the lock.
  void LockAsOwner() {
    Announce();
    // Sequentially consistent, for the fenced handshake; a plain load on x86 and ARM.
    if (others_.load(std::memory_order_seq_cst)) [[unlikely]] {
      WaitForOthers();
    }
  }
  void UnlockAsOwner() { owner_.store(false, std::memory_order_release); }
  // Owner thread only. LockAsOwner that never waits: true holding the lock, false (not
  // holding it) if another thread holds or waits for it. Calls no function, so that a
  // fast path built on it stays a leaf.
  bool TryLockAsOwner() {
    Announce();
    if (others_.load(std::memory_order_seq_cst)) [[unlikely]] {
      UnlockAsOwner();
      return false;
    }
    return true;
  }

  // Holds the lock as its owner for a scope.
  class AsOwner {
   public:
    explicit AsOwner(OwnerLock& lock) : lock_(lock) { lock_.LockAsOwner(); }
    ~AsOwner() { lock_.UnlockAsOwner(); }
    AsOwner(const AsOwner&) = delete;
    AsOwner& operator=(const AsOwner&) = delete;

   private:
    OwnerLock& lock_;
  };

  // Any thread that is not holding the lock as its owner; returns holding it.
  void Lock() { LockAll({this}); }
  void Unlock() { UnlockAll({this}); }

  // Locks (unlocks) all of `locks` as Lock does, with one process-wide barrier for
  // all of them. Pass them in the same order everywhere.
  static void LockAll(absl::Span<OwnerLock* const> locks);
  static void UnlockAll(absl::Span<OwnerLock* const> locks);

  // True if the owner's side runs without a locked instruction (membarrier works and
  // this is not a ThreadSanitizer build).
  static bool OwnerSideIsPlain();

 private:
  void Announce() {
    if (plain_owner_side.load(std::memory_order_relaxed)) {
      owner_.store(true, std::memory_order_relaxed);
      // The other side's membarrier orders this store before the load that follows.
      std::atomic_signal_fence(std::memory_order_seq_cst);
    } else {
      owner_.exchange(true, std::memory_order_seq_cst);
    }
  }
  void WaitForOthers();

  // Set once membarrier registration succeeded (never in tsan builds); never cleared.
  static std::atomic<bool> plain_owner_side;

  std::atomic<bool> owner_{false};
  std::atomic<bool> others_{false};
  std::mutex others_mu_;
};

}  // namespace genesis::memory

#endif  // GENESIS_MEMORY_OWNER_LOCK_H_
