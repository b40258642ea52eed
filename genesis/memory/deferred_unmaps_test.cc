#include "genesis/memory/deferred_unmaps.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace genesis::memory {
namespace {

using std::chrono::milliseconds;

constexpr uintptr_t kBase = uintptr_t{1} << 40;
constexpr size_t kChunk = size_t{2} << 20;

Piece At(int chunk, int chunks = 1) {
  return Piece{kBase + chunk * kChunk, chunks * kChunk, 0};
}

// An unmap function that records the batches it gets and, while closed, holds the
// worker inside it.
class Gate {
 public:
  absl::Status Unmap(const std::vector<Piece>& batch) {
    std::unique_lock<std::mutex> lock(mu_);
    entered_ = true;
    changed_.notify_all();
    changed_.wait(lock, [this] { return open_; });
    batches_.push_back(batch);
    return next_status_;
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    changed_.notify_all();
  }
  void WaitEntered() {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [this] { return entered_; });
  }
  void FailWith(absl::Status status) {
    std::lock_guard<std::mutex> lock(mu_);
    next_status_ = std::move(status);
  }
  std::vector<std::vector<Piece>> batches() {
    std::lock_guard<std::mutex> lock(mu_);
    return batches_;
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  bool open_ = false;
  bool entered_ = false;
  absl::Status next_status_;
  std::vector<std::vector<Piece>> batches_;
};

DeferredUnmaps::UnmapFunction Through(Gate& gate) {
  return [&gate](const std::vector<Piece>& batch) { return gate.Unmap(batch); };
}

TEST(DeferredUnmapsTest, PostReturnsAtOnceAndPiecesStayPendingUntilUnmapped) {
  Gate gate;
  DeferredUnmaps unmaps(Through(gate));
  unmaps.Post({At(0, 2), At(4)});
  gate.WaitEntered();
  EXPECT_EQ(unmaps.pending_bytes(), 3 * kChunk);
  // A range clear of the pending pieces does not wait.
  unmaps.WaitForRange(At(2).start, 2 * kChunk);
  unmaps.WaitForRange(At(5).start, 10 * kChunk);
  // One that overlaps waits for the worker.
  auto overlapping = std::async(std::launch::async,
                                [&] { unmaps.WaitForRange(At(1).start + 4096, 4096); });
  auto all = std::async(std::launch::async, [&] { unmaps.WaitAll(); });
  EXPECT_EQ(overlapping.wait_for(milliseconds(50)), std::future_status::timeout);
  EXPECT_EQ(all.wait_for(milliseconds(0)), std::future_status::timeout);
  gate.Open();
  overlapping.get();
  all.get();
  EXPECT_EQ(unmaps.pending_bytes(), 0u);
  ASSERT_EQ(gate.batches().size(), 1u);
  EXPECT_EQ(gate.batches()[0], (std::vector<Piece>{At(0, 2), At(4)}));
  EXPECT_TRUE(unmaps.TakeError().ok());
}

TEST(DeferredUnmapsTest, BatchesThatQueueUpRunTogetherInOrder) {
  Gate gate;
  DeferredUnmaps unmaps(Through(gate));
  unmaps.Post({At(0)});
  gate.WaitEntered();  // The worker holds the first batch; these two queue up.
  unmaps.Post({At(3)});
  unmaps.Post({At(1), At(2)});
  unmaps.Post({});  // Nothing to do.
  gate.Open();
  unmaps.WaitAll();
  EXPECT_EQ(unmaps.batches_run(), 2u);
  const auto batches = gate.batches();
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[0], std::vector<Piece>{At(0)});
  EXPECT_EQ(batches[1], (std::vector<Piece>{At(3), At(1), At(2)}));
  // A piece unmapped can be handed over again once it was mapped again.
  unmaps.Post({At(0)});
  unmaps.WaitAll();
  EXPECT_EQ(gate.batches().size(), 3u);
}

TEST(DeferredUnmapsTest, KeepsTheFirstErrorUntilTaken) {
  Gate gate;
  gate.Open();
  DeferredUnmaps unmaps(Through(gate));
  gate.FailWith(absl::InternalError("device lost"));
  unmaps.Post({At(0)});
  unmaps.WaitAll();
  gate.FailWith(absl::UnavailableError("second"));
  unmaps.Post({At(1)});
  unmaps.WaitAll();
  // Failed or not, the pieces are no longer pending.
  EXPECT_EQ(unmaps.pending_bytes(), 0u);
  const absl::Status first = unmaps.TakeError();
  EXPECT_TRUE(absl::IsInternal(first)) << first;
  EXPECT_EQ(first.message(), "device lost");
  EXPECT_TRUE(unmaps.TakeError().ok());
  gate.FailWith(absl::OkStatus());
  unmaps.Post({At(2)});
  unmaps.WaitAll();
  EXPECT_TRUE(unmaps.TakeError().ok());
}

TEST(DeferredUnmapsTest, DestructionFinishesWhatWasHandedOver) {
  Gate gate;
  std::thread opener;
  {
    DeferredUnmaps unmaps(Through(gate));
    unmaps.Post({At(0)});
    gate.WaitEntered();
    unmaps.Post({At(1)});
    opener = std::thread([&] {
      std::this_thread::sleep_for(milliseconds(20));
      gate.Open();
    });
  }  // Waits for the gate, then runs the second batch.
  opener.join();
  const auto batches = gate.batches();
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[1], std::vector<Piece>{At(1)});
}

TEST(DeferredUnmapsTest, NeverPostedStartsNoWorker) {
  std::atomic<int> calls{0};
  {
    DeferredUnmaps unmaps([&](const std::vector<Piece>&) {
      ++calls;
      return absl::OkStatus();
    });
    unmaps.WaitAll();
    unmaps.WaitForRange(kBase, kChunk);
    EXPECT_EQ(unmaps.batches_run(), 0u);
  }
  EXPECT_EQ(calls.load(), 0);
}

// Threads that each unmap and map again their own pieces, as pools on several streams
// do: every thread waits for its own pieces only, and every piece is unmapped once per
// post. Meant for tsan as much as for the counts.
TEST(DeferredUnmapsTest, ManyThreadsPostAndWaitForTheirOwnRanges) {
  constexpr int kThreads = 4;
  constexpr int kRounds = 200;
  std::mutex mu;
  std::vector<int> unmapped(kThreads * 2, 0);
  DeferredUnmaps unmaps([&](const std::vector<Piece>& batch) {
    std::lock_guard<std::mutex> lock(mu);
    for (const Piece& p : batch) ++unmapped[(p.start - kBase) / kChunk];
    return absl::OkStatus();
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        const Piece mine = At(2 * t + r % 2);
        // Mapping where the piece was waits for its unmap.
        unmaps.WaitForRange(mine.start, mine.size);
        unmaps.Post({mine});
      }
    });
  }
  for (std::thread& t : threads) t.join();
  unmaps.WaitAll();
  std::lock_guard<std::mutex> lock(mu);
  for (int i = 0; i < kThreads * 2; ++i) EXPECT_EQ(unmapped[i], kRounds / 2) << i;
}

}  // namespace
}  // namespace genesis::memory
