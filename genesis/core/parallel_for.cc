#include "genesis/core/parallel_for.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace genesis {
namespace {

// One ParallelFor call's parts. It lives on the caller's stack; workers touch it only
// under the pool's lock, and the caller returns only once every part has finished and
// the batch has left the queue, so no worker can reach it afterwards.
struct Batch {
  absl::FunctionRef<void(int)> part;
  int parts;
  int next = 1;      // The next part to hand out (part 0 is the caller's).
  int finished = 0;  // Parts that have returned.
};

// How long an idle worker spins before it sleeps.
constexpr std::chrono::microseconds kSpin{100};

class Workers {
 public:
  // Never destroyed: workers may still wait on its lock while the process exits.
  static Workers& Get() {
    static Workers* const workers = [] {
      Workers* w = new Workers;
      // A child forked while a worker held the lock would inherit it locked: the
      // forking thread holds it across fork(), and the child starts without workers.
      pthread_atfork([] { Get().sync_->mu.lock(); }, [] { Get().sync_->mu.unlock(); },
                     [] { Get().ForgetWorkers(); });
      return w;
    }();
    return *workers;
  }

  void Run(int parts, absl::FunctionRef<void(int)> part) {
    Batch batch{part, parts};
    Sync& sync = *sync_;
    {
      std::lock_guard<std::mutex> lock(sync.mu);
      queue_.push_back(&batch);
      queued_.store(static_cast<int>(queue_.size()), std::memory_order_relaxed);
      // Enough workers for the other parts, as far as there are cores for them.
      const int wanted = std::min(parts - 1, HardwareThreads() - 1);
      for (; threads_ < wanted; ++threads_) std::thread([this] { Work(); }).detach();
    }
    sync.work.notify_all();
    part(0);
    std::unique_lock<std::mutex> lock(sync.mu);
    ++batch.finished;
    // Take what no worker has taken yet.
    while (batch.next < batch.parts) {
      const int i = batch.next++;
      lock.unlock();
      part(i);
      lock.lock();
      ++batch.finished;
    }
    Remove(&batch);
    sync.done.wait(lock, [&] { return batch.finished == batch.parts; });
  }

 private:
  Workers() = default;

  void Work() {
    Sync& sync = *sync_;
    std::unique_lock<std::mutex> lock(sync.mu);
    for (;;) {
      if (queue_.empty()) {
        // Spin a while before sleeping: waking a sleeping thread takes tens of
        // microseconds on some machines (virtual ones above all), as long as a
        // copy's part.
        lock.unlock();
        const auto until = std::chrono::steady_clock::now() + kSpin;
        while (queued_.load(std::memory_order_relaxed) == 0 &&
               std::chrono::steady_clock::now() < until) {
          Pause();
        }
        lock.lock();
        sync.work.wait(lock, [this] { return !queue_.empty(); });
      }
      Batch* const batch = queue_.front();
      if (batch->next >= batch->parts) {
        Pop(queue_.begin());
        continue;
      }
      const int i = batch->next++;
      lock.unlock();
      batch->part(i);
      lock.lock();
      // The caller may return as soon as the lock is released: nothing touches the
      // batch after this.
      if (++batch->finished == batch->parts) sync.done.notify_all();
    }
  }

  // In a forked child, holding the lock (taken before the fork): the parent's workers
  // and callers do not exist here, but the lock and condition variables still count
  // them (the parent's sleeping workers as waiters, which would hold up a notify for
  // ever). Starts afresh with new ones; the old ones are left as they are.
  void ForgetWorkers() {
    queue_.clear();
    queued_.store(0, std::memory_order_relaxed);
    threads_ = 0;
    sync_ = new Sync;
  }

  // Holding the lock: takes `batch` out of the queue if it is still there.
  void Remove(Batch* batch) {
    const auto it = std::find(queue_.begin(), queue_.end(), batch);
    if (it != queue_.end()) Pop(it);
  }
  // Holding the lock: erases `it` from the queue.
  void Pop(std::deque<Batch*>::iterator it) {
    queue_.erase(it);
    queued_.store(static_cast<int>(queue_.size()), std::memory_order_relaxed);
  }

  static void Pause() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }

  // The lock and the condition variables, replaced only in a forked child.
  struct Sync {
    std::mutex mu;
    std::condition_variable work;  // A batch was queued.
    std::condition_variable done;  // A batch's last part finished.
  };
  Sync* sync_ = new Sync;
  std::deque<Batch*> queue_;  // Batches with parts not yet handed out (or just done).
  // queue_.size(), for spinning workers to read without the lock.
  std::atomic<int> queued_{0};
  int threads_ = 0;  // Workers started.
};

}  // namespace

int HardwareThreads() {
  static const int threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  return threads;
}

void ParallelFor(int parts, absl::FunctionRef<void(int)> part) {
  if (parts <= 0) return;
  if (parts == 1) {
    part(0);
    return;
  }
  Workers::Get().Run(parts, part);
}

}  // namespace genesis
