#include "genesis/memory/owner_lock.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

namespace genesis::memory {
namespace {

#if defined(__SANITIZE_THREAD__)
constexpr bool kThreadSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool kThreadSanitizer = true;
#else
constexpr bool kThreadSanitizer = false;
#endif
#else
constexpr bool kThreadSanitizer = false;
#endif

// Registers once; true if MEMBARRIER_CMD_PRIVATE_EXPEDITED may be used from now on.
bool MembarrierRegistered() {
  static const bool registered = [] {
    if (kThreadSanitizer) return false;
    const long supported = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    if (supported < 0 || (supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return false;
    return syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
  }();
  return registered;
}

// Spins briefly, then yields, while `busy()`.
template <typename Busy>
void WaitWhile(Busy busy) {
  for (int spins = 0; busy(); ++spins) {
    if (spins >= 64) std::this_thread::yield();
  }
}

}  // namespace

std::atomic<bool> OwnerLock::plain_owner_side{false};

OwnerLock::OwnerLock() {
  // An owner may only skip its fence once every other side will use membarrier, which
  // it does whenever registration succeeded.
  if (MembarrierRegistered()) plain_owner_side.store(true, std::memory_order_relaxed);
}

bool OwnerLock::OwnerSideIsPlain() {
  return MembarrierRegistered() && plain_owner_side.load(std::memory_order_relaxed);
}

void OwnerLock::WaitForOthers() {
  for (;;) {
    owner_.store(false, std::memory_order_release);
    WaitWhile([this] { return others_.load(std::memory_order_acquire); });
    Announce();
    if (!others_.load(std::memory_order_seq_cst)) return;
  }
}

void OwnerLock::LockAll(absl::Span<OwnerLock* const> locks) {
  for (OwnerLock* l : locks) {
    l->others_mu_.lock();
    l->others_.store(true, std::memory_order_seq_cst);
  }
  // Every owner that announced itself before our stores is now seen as announced;
  // every later one sees our flag and backs off.
  if (MembarrierRegistered() &&
      syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0) {
    // Registered processes cannot get an error here (membarrier(2)); owners already
    // rely on it, so there is no safe way on.
    std::perror("genesis OwnerLock: membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)");
    std::abort();
  }
  for (OwnerLock* l : locks) {
    WaitWhile([l] { return l->owner_.load(std::memory_order_seq_cst); });
  }
}

void OwnerLock::UnlockAll(absl::Span<OwnerLock* const> locks) {
  for (OwnerLock* l : locks) {
    l->others_.store(false, std::memory_order_release);
    l->others_mu_.unlock();
  }
}

}  // namespace genesis::memory
