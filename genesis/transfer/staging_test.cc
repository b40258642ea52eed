#include "genesis/transfer/staging.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "genesis/core/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace genesis::transfer {
namespace {

using ::testing::HasSubstr;

std::string MessageOf(const absl::Status& status) {
  return std::string(status.message());
}

std::vector<unsigned char> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<unsigned char> v(n);
  for (auto& b : v) b = static_cast<unsigned char>(rng());
  return v;
}

// Guard bytes on each side of a destination, to catch writes outside the range.
constexpr size_t kGuard = 64;
constexpr unsigned char kGuardByte = 0xa5;

// A destination of `n` bytes between guards.
struct Guarded {
  explicit Guarded(size_t n) : storage(n + 2 * kGuard, kGuardByte) {}
  unsigned char* data() { return storage.data() + kGuard; }
  size_t size() const { return storage.size() - 2 * kGuard; }
  bool GuardsIntact() const {
    for (size_t i = 0; i < kGuard; ++i) {
      if (storage[i] != kGuardByte || storage[storage.size() - 1 - i] != kGuardByte) {
        return false;
      }
    }
    return true;
  }
  bool Equals(const std::vector<unsigned char>& expected) const {
    return std::equal(expected.begin(), expected.end(), storage.begin() + kGuard);
  }
  std::vector<unsigned char> storage;
};

// Wraps a HostStagingEngine and checks the pipeline's side of the contract:
//  * no CopyAsync uses a staging buffer (slot) whose previous copy has not been
//    confirmed by a Wait that returned OK after it;
//  * Wait is only called for a slot after a Record.
// Violations are counted and described; the source checksums of HostStagingEngine
// catch the other half (a staging buffer written while its DMA is pending).
class CheckingEngine : public StagingEngine {
 public:
  struct Shared {
    std::mutex mu;
    int violations = 0;
    std::string first_violation;
    HostStagingEngine::Stats final_stats;
    bool destroyed = false;
  };

  CheckingEngine(HostStagingEngine::Options options, std::shared_ptr<Shared> shared)
      : shared_(std::move(shared)) {
    std::shared_ptr<Shared> s = shared_;
    options.on_destroy = [s](const HostStagingEngine::Stats& stats) {
      std::lock_guard<std::mutex> lock(s->mu);
      s->final_stats = stats;
      s->destroyed = true;
    };
    inner_ = std::make_unique<HostStagingEngine>(std::move(options));
  }

  absl::StatusOr<void*> AllocateStaging(size_t bytes) override {
    return inner_->AllocateStaging(bytes);
  }
  void FreeStaging(void* p) override { inner_->FreeStaging(p); }

  absl::Status CopyAsync(void* dst, const void* src, size_t bytes, int slot) override {
    Grow(slot);
    if (unconfirmed_[slot] > 0) {
      Violation(absl::StrCat("CopyAsync on slot ", slot, " with ", unconfirmed_[slot],
                             " unconfirmed copies"));
    }
    absl::Status s = inner_->CopyAsync(dst, src, bytes, slot);
    if (s.ok()) ++unconfirmed_[slot];
    return s;
  }
  absl::Status Record(int slot) override {
    Grow(slot);
    absl::Status s = inner_->Record(slot);
    if (s.ok()) recorded_[slot] = unconfirmed_[slot];
    return s;
  }
  absl::Status Wait(int slot) override {
    Grow(slot);
    absl::Status s = inner_->Wait(slot);
    if (s.ok()) unconfirmed_[slot] -= recorded_[slot], recorded_[slot] = 0;
    return s;
  }

  HostStagingEngine::Stats stats() const { return inner_->stats(); }
  // Slots with copies queued that no successful Wait has covered.
  int UnconfirmedSlots() const {
    return static_cast<int>(std::count_if(unconfirmed_.begin(), unconfirmed_.end(),
                                          [](int n) { return n > 0; }));
  }

 private:
  void Grow(int slot) {
    if (slot >= static_cast<int>(unconfirmed_.size())) {
      unconfirmed_.resize(slot + 1, 0);
      recorded_.resize(slot + 1, 0);
    }
  }
  void Violation(std::string what) {
    std::lock_guard<std::mutex> lock(shared_->mu);
    if (shared_->violations++ == 0) shared_->first_violation = std::move(what);
  }

  std::shared_ptr<Shared> shared_;
  std::unique_ptr<HostStagingEngine> inner_;
  std::vector<int> unconfirmed_;  // Per slot: copies queued and not confirmed.
  std::vector<int> recorded_;     // Per slot: of those, covered by the last Record.
};

struct Rig {
  std::unique_ptr<StagingPipeline> pipeline;
  CheckingEngine* engine;  // Owned by the pipeline.
  std::shared_ptr<CheckingEngine::Shared> shared;
};

Rig MakeRig(StagingPipeline::Options options,
            HostStagingEngine::Options engine_options = {}) {
  auto shared = std::make_shared<CheckingEngine::Shared>();
  auto engine = std::make_unique<CheckingEngine>(engine_options, shared);
  CheckingEngine* raw = engine.get();
  std::unique_ptr<StagingPipeline> pipeline =
      ValueOrThrow(StagingPipeline::Create(std::move(engine), options));
  return Rig{std::move(pipeline), raw, shared};
}

// Copies `size` random bytes host -> device -> host and checks both legs byte for byte,
// the guards, the engine's counters and the checker.
void RoundTrip(Rig& rig, size_t size, uint32_t seed) {
  SCOPED_TRACE(absl::StrCat("size ", size));
  const std::vector<unsigned char> src = RandomBytes(size, seed);
  Guarded device(size);
  ASSERT_TRUE(rig.pipeline->HostToDevice(device.data(), src.data(), size).ok());
  EXPECT_TRUE(device.Equals(src));
  EXPECT_TRUE(device.GuardsIntact());
  EXPECT_EQ(rig.engine->stats().copies_pending, 0);
  EXPECT_EQ(rig.engine->UnconfirmedSlots(), 0);

  Guarded back(size);
  ASSERT_TRUE(rig.pipeline->DeviceToHost(back.data(), device.data(), size).ok());
  EXPECT_TRUE(back.Equals(src));
  EXPECT_TRUE(back.GuardsIntact());
  EXPECT_EQ(rig.engine->stats().copies_pending, 0);
  EXPECT_EQ(rig.engine->UnconfirmedSlots(), 0);
}

void ExpectClean(const Rig& rig) {
  EXPECT_EQ(rig.shared->violations, 0) << rig.shared->first_violation;
  const HostStagingEngine::Stats stats = rig.engine->stats();
  EXPECT_EQ(stats.source_mismatches, 0);
  EXPECT_EQ(stats.copies_pending, 0);
}

std::vector<size_t> Sizes(size_t chunk) {
  return {0,    1, chunk - 1, chunk, chunk + 1, 2 * chunk, 7 * chunk + 13, 40 * chunk + 1,
          12345};
}

TEST(StagingPipelineTest, ByteExactAcrossSizesThreadsAndBuffers) {
  uint32_t seed = 1;
  for (size_t chunk : {size_t{1000}, size_t{4096}}) {
    for (int threads : {1, 2, 3, 8}) {
      for (int buffers : {1, 2, 3, 4}) {
        SCOPED_TRACE(
            absl::StrCat("chunk ", chunk, " threads ", threads, " buffers ", buffers));
        // min_piece_bytes = 1: chunks are always shared between the threads.
        Rig rig = MakeRig({.chunk_bytes = chunk,
                           .num_buffers = buffers,
                           .num_threads = threads,
                           .min_piece_bytes = 1});
        for (size_t size : Sizes(chunk)) RoundTrip(rig, size, seed++);
        ExpectClean(rig);
      }
    }
  }
}

TEST(StagingPipelineTest, ByteExactWithSlowEngine) {
  // Each DMA sleeps, so a buffer reused or read too early shows as wrong bytes, a
  // source mismatch or a checker violation.
  uint32_t seed = 100;
  for (int threads : {1, 4}) {
    for (int buffers : {1, 2, 4}) {
      SCOPED_TRACE(absl::StrCat("threads ", threads, " buffers ", buffers));
      Rig rig = MakeRig({.chunk_bytes = 512,
                         .num_buffers = buffers,
                         .num_threads = threads,
                         .min_piece_bytes = 64},
                        {.copy_delay = std::chrono::microseconds(200)});
      for (size_t size :
           {size_t{1}, size_t{511}, size_t{512 * 9 + 7}, size_t{512 * 20}}) {
        RoundTrip(rig, size, seed++);
      }
      ExpectClean(rig);
    }
  }
}

TEST(StagingPipelineTest, DefaultOptionsLargeCopy) {
  // Default chunk (4 MiB) and min_piece_bytes: a 4 MiB chunk goes to 4 threads.
  Rig rig = MakeRig({});
  RoundTrip(rig, (size_t{4} << 20) * 3 + 12345, 7);
  ExpectClean(rig);
  EXPECT_EQ(rig.engine->stats().copies_queued, 8);  // 4 chunks each way.
}

TEST(StagingPipelineTest, ChunksAreQueuedInOrderAndEachOnce) {
  Rig rig = MakeRig(
      {.chunk_bytes = 100, .num_buffers = 3, .num_threads = 2, .min_piece_bytes = 1});
  RoundTrip(rig, 1050, 3);  // 11 chunks each way.
  const HostStagingEngine::Stats stats = rig.engine->stats();
  EXPECT_EQ(stats.copies_queued, 22);
  EXPECT_EQ(stats.record_calls, 22);
  EXPECT_EQ(stats.bytes_copied, 2100);
  ExpectClean(rig);
}

TEST(StagingPipelineTest, ZeroBytesTouchesNothing) {
  Rig rig = MakeRig({.chunk_bytes = 64});
  EXPECT_TRUE(rig.pipeline->HostToDevice(nullptr, nullptr, 0).ok());
  EXPECT_TRUE(rig.pipeline->DeviceToHost(nullptr, nullptr, 0).ok());
  EXPECT_EQ(rig.engine->stats().copy_calls, 0);
}

TEST(StagingPipelineTest, NullPointersAreInvalid) {
  Rig rig = MakeRig({.chunk_bytes = 64});
  char buffer[8] = {};
  absl::Status s = rig.pipeline->HostToDevice(nullptr, buffer, 8);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(MessageOf(s), HasSubstr("device destination is null"));
  s = rig.pipeline->HostToDevice(buffer, nullptr, 8);
  EXPECT_THAT(MessageOf(s), HasSubstr("host source is null"));
  s = rig.pipeline->DeviceToHost(nullptr, buffer, 8);
  EXPECT_THAT(MessageOf(s), HasSubstr("host destination is null"));
  s = rig.pipeline->DeviceToHost(buffer, nullptr, 8);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(MessageOf(s), HasSubstr("device source is null"));
  EXPECT_EQ(rig.engine->stats().copy_calls, 0);
}

TEST(StagingPipelineTest, InvalidOptionsNameTheValue) {
  struct Case {
    StagingPipeline::Options options;
    std::string message;
  };
  const Case cases[] = {
      {{.chunk_bytes = 0}, "chunk_bytes = 0"},
      {{.chunk_bytes = (size_t{1} << 30) + 1}, "chunk_bytes = 1073741825"},
      {{.num_buffers = 0}, "num_buffers = 0"},
      {{.num_buffers = 65}, "num_buffers = 65"},
      {{.num_buffers = -3}, "num_buffers = -3"},
      {{.num_threads = 0}, "num_threads = 0"},
      {{.num_threads = 257}, "num_threads = 257"},
      {{.min_piece_bytes = 0}, "min_piece_bytes = 0"},
  };
  for (const Case& c : cases) {
    auto shared = std::make_shared<CheckingEngine::Shared>();
    absl::StatusOr<std::unique_ptr<StagingPipeline>> p = StagingPipeline::Create(
        std::make_unique<CheckingEngine>(HostStagingEngine::Options(), shared),
        c.options);
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(MessageOf(p.status()), HasSubstr(c.message));
    EXPECT_TRUE(shared->destroyed);
    EXPECT_EQ(shared->final_stats.allocate_calls, 0);
  }
  absl::StatusOr<std::unique_ptr<StagingPipeline>> p =
      StagingPipeline::Create(nullptr, StagingPipeline::Options());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(MessageOf(p.status()), HasSubstr("engine is null"));
}

TEST(StagingPipelineTest, AllocationFailureFreesWhatWasAllocated) {
  for (int fail_at = 1; fail_at <= 4; ++fail_at) {
    SCOPED_TRACE(absl::StrCat("fail_at ", fail_at));
    auto shared = std::make_shared<CheckingEngine::Shared>();
    absl::StatusOr<std::unique_ptr<StagingPipeline>> p = StagingPipeline::Create(
        std::make_unique<CheckingEngine>(
            HostStagingEngine::Options{.fail_allocate_at = fail_at}, shared),
        {.chunk_bytes = 256, .num_buffers = 4});
    EXPECT_EQ(p.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(
        MessageOf(p.status()),
        HasSubstr(absl::StrCat("allocating staging buffer ", fail_at - 1, " of 4")));
    EXPECT_THAT(
        MessageOf(p.status()),
        HasSubstr(absl::StrCat("injected failure of AllocateStaging call #", fail_at)));
    ASSERT_TRUE(shared->destroyed);
    EXPECT_EQ(shared->final_stats.live_allocations, 0);
    EXPECT_EQ(shared->final_stats.max_allocations, fail_at - 1);
    EXPECT_EQ(shared->final_stats.bad_frees, 0);
  }
}

TEST(StagingPipelineTest, DestructionWhileIdleIsClean) {
  for (int copies : {0, 1, 3}) {
    SCOPED_TRACE(absl::StrCat("copies ", copies));
    std::shared_ptr<CheckingEngine::Shared> shared;
    {
      Rig rig = MakeRig({.chunk_bytes = 128, .num_buffers = 3, .num_threads = 5},
                        {.copy_delay = std::chrono::microseconds(50)});
      shared = rig.shared;
      for (int i = 0; i < copies; ++i) RoundTrip(rig, 1000, 40 + i);
    }
    ASSERT_TRUE(shared->destroyed);
    EXPECT_EQ(shared->final_stats.live_allocations, 0);
    EXPECT_EQ(shared->final_stats.max_allocations, 3);
    EXPECT_EQ(shared->final_stats.bad_frees, 0);
    EXPECT_EQ(shared->final_stats.copies_pending, 0);
    EXPECT_EQ(shared->violations, 0) << shared->first_violation;
  }
}

TEST(StagingPipelineTest, ConcurrentCallsAreSerialisedAndExact) {
  Rig rig = MakeRig(
      {.chunk_bytes = 300, .num_buffers = 2, .num_threads = 3, .min_piece_bytes = 32},
      {.copy_delay = std::chrono::microseconds(20)});
  constexpr int kCallers = 4;
  std::atomic<int> failures{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < kCallers; ++t) {
    callers.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) {
        const size_t size = 1000 + 317 * t + i;
        const std::vector<unsigned char> src = RandomBytes(size, 1000 + t * 10 + i);
        std::vector<unsigned char> device(size), back(size);
        if (!rig.pipeline->HostToDevice(device.data(), src.data(), size).ok() ||
            !rig.pipeline->DeviceToHost(back.data(), device.data(), size).ok() ||
            back != src || device != src) {
          ++failures;
        }
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(failures.load(), 0);
  ExpectClean(rig);
}

// Runs the same two-way copy against engines that fail the Nth call of one kind, for
// every N the copy reaches, and checks that each failure is the returned status, that
// nothing is left running on return (the engine queue is empty, every slot confirmed,
// and the buffers can be reused at once) and that the pipeline works again afterwards.
enum class FailKind { kCopy, kRecord, kWait };

const char* Name(FailKind kind) {
  switch (kind) {
    case FailKind::kCopy:
      return "CopyAsync";
    case FailKind::kRecord:
      return "Record";
    case FailKind::kWait:
      return "Wait";
  }
  return "?";
}

HostStagingEngine::Options FailingAt(FailKind kind, int n, int times = 1) {
  HostStagingEngine::Options o{.copy_delay = std::chrono::microseconds(30),
                               .fail_times = times};
  switch (kind) {
    case FailKind::kCopy:
      o.fail_copy_at = n;
      break;
    case FailKind::kRecord:
      o.fail_record_at = n;
      break;
    case FailKind::kWait:
      o.fail_wait_at = n;
      break;
  }
  return o;
}

constexpr StagingPipeline::Options kSmallPipeline{
    .chunk_bytes = 256, .num_buffers = 3, .num_threads = 3, .min_piece_bytes = 16};
constexpr size_t kSweepBytes = 256 * 7 + 100;  // 8 chunks.

int64_t CallsOf(const HostStagingEngine::Stats& stats, FailKind kind) {
  switch (kind) {
    case FailKind::kCopy:
      return stats.copy_calls;
    case FailKind::kRecord:
      return stats.record_calls;
    case FailKind::kWait:
      return stats.wait_calls;
  }
  return 0;
}

TEST(StagingPipelineTest, EveryInjectedFailureIsReturnedWithNothingRunning) {
  // How many calls of each kind a clean host->device + device->host pair makes.
  HostStagingEngine::Stats clean;
  {
    Rig rig = MakeRig(kSmallPipeline);
    RoundTrip(rig, kSweepBytes, 5);
    clean = rig.engine->stats();
  }
  for (FailKind kind : {FailKind::kCopy, FailKind::kRecord, FailKind::kWait}) {
    const int64_t calls = CallsOf(clean, kind);
    ASSERT_GT(calls, 10);
    for (int n = 1; n <= calls; ++n) {
      SCOPED_TRACE(absl::StrCat(Name(kind), " #", n));
      Rig rig = MakeRig(kSmallPipeline, FailingAt(kind, n));
      std::vector<unsigned char> src = RandomBytes(kSweepBytes, n);
      std::vector<unsigned char> device(kSweepBytes), back(kSweepBytes);
      absl::Status h2d =
          rig.pipeline->HostToDevice(device.data(), src.data(), kSweepBytes);
      absl::Status d2h;
      if (h2d.ok()) {
        EXPECT_EQ(device, src);
        d2h = rig.pipeline->DeviceToHost(back.data(), device.data(), kSweepBytes);
      }
      const absl::Status& failed = h2d.ok() ? d2h : h2d;
      ASSERT_FALSE(failed.ok()) << "the injected failure was not reported";
      EXPECT_EQ(failed.code(), absl::StatusCode::kUnavailable);
      EXPECT_THAT(MessageOf(failed), HasSubstr(absl::StrCat("injected failure of ",
                                                            Name(kind), " call #", n)));
      EXPECT_THAT(MessageOf(failed),
                  HasSubstr(h2d.ok() ? "DeviceToHost" : "HostToDevice"));
      // Nothing is left running: the engine has no copy pending and every slot's copies
      // were confirmed by a later Wait (the failure was a one-off).
      EXPECT_EQ(rig.engine->stats().copies_pending, 0);
      EXPECT_EQ(rig.engine->UnconfirmedSlots(), 0);
      // The buffers are the caller's again: scribbling on them races with nothing
      // (ThreadSanitizer would say) and does not disturb the engine (source checksums).
      std::fill(src.begin(), src.end(), 0x11);
      std::fill(device.begin(), device.end(), 0x22);
      std::fill(back.begin(), back.end(), 0x33);
      // The pipeline works again.
      RoundTrip(rig, kSweepBytes, 1000 + n);
      ExpectClean(rig);
    }
  }
}

TEST(StagingPipelineTest, FailureWhileThreadsAreCopyingWaitsForThem) {
  // Large chunks, so that the threads are still copying chunks when the engine fails.
  // The host buffer is freed as soon as the call returns: a thread still copying would
  // touch freed memory (AddressSanitizer) or race with the free (ThreadSanitizer).
  constexpr size_t kChunk = size_t{1} << 20;
  constexpr size_t kBytes = 16 * kChunk;
  const StagingPipeline::Options options{.chunk_bytes = kChunk,
                                         .num_buffers = 4,
                                         .num_threads = 2,
                                         .min_piece_bytes = 16 << 10};
  for (bool to_device : {true, false}) {
    SCOPED_TRACE(to_device ? "HostToDevice" : "DeviceToHost");
    // Host to device: the second CopyAsync fails while chunks 2 and 3 are being filled.
    // Device to host: the second Wait fails while chunk 0 is being copied out.
    HostStagingEngine::Options engine_options;
    if (to_device) {
      engine_options.fail_copy_at = 2;
    } else {
      engine_options.fail_wait_at = 2;
    }
    Rig rig = MakeRig(options, engine_options);
    auto host = std::make_unique<unsigned char[]>(kBytes);
    auto device = std::make_unique<unsigned char[]>(kBytes);
    std::memset(host.get(), 1, kBytes);
    absl::Status s = to_device
                         ? rig.pipeline->HostToDevice(device.get(), host.get(), kBytes)
                         : rig.pipeline->DeviceToHost(host.get(), device.get(), kBytes);
    host.reset();
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
    EXPECT_EQ(rig.engine->stats().copies_pending, 0);
    device.reset();
  }
}

TEST(StagingPipelineTest, ExecutionFailureIsStickyAndDestructionStillClean) {
  for (bool to_device : {true, false}) {
    for (int n : {1, 2, 5, 8}) {
      SCOPED_TRACE(
          absl::StrCat(to_device ? "HostToDevice" : "DeviceToHost", " copy #", n));
      std::shared_ptr<CheckingEngine::Shared> shared;
      {
        Rig rig = MakeRig(kSmallPipeline, {.copy_delay = std::chrono::microseconds(30),
                                           .fail_execution_at = n});
        shared = rig.shared;
        std::vector<unsigned char> src = RandomBytes(kSweepBytes, n);
        std::vector<unsigned char> dst(kSweepBytes);
        absl::Status s =
            to_device ? rig.pipeline->HostToDevice(dst.data(), src.data(), kSweepBytes)
                      : rig.pipeline->DeviceToHost(dst.data(), src.data(), kSweepBytes);
        EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
        EXPECT_THAT(MessageOf(s),
                    HasSubstr(absl::StrCat("injected failure of copy #", n)));
        EXPECT_EQ(rig.engine->stats().copies_pending, 0);
        std::fill(src.begin(), src.end(), 0);
        // The engine is dead, as a CUDA context after a sticky error: later calls fail.
        absl::Status again = rig.pipeline->HostToDevice(dst.data(), src.data(), 10);
        EXPECT_EQ(again.code(), absl::StatusCode::kInternal);
      }
      ASSERT_TRUE(shared->destroyed);
      EXPECT_EQ(shared->final_stats.live_allocations, 0);
      EXPECT_EQ(shared->final_stats.copies_pending, 0);
      EXPECT_EQ(shared->violations, 0) << shared->first_violation;
    }
  }
}

// One staging buffer, so that the Waits are counted deterministically: the first is
// the one before chunk 1 may reuse the buffer, the second the clean-up's retry.
constexpr StagingPipeline::Options kOneBuffer{
    .chunk_bytes = 256, .num_buffers = 1, .num_threads = 3, .min_piece_bytes = 16};

TEST(StagingPipelineTest, UnconfirmedBufferIsRetriedByTheNextCall) {
  // The first Wait of the copy fails, and so does the Wait the clean-up retries: the
  // buffer is left unconfirmed. The next call confirms it first (third Wait succeeds).
  Rig rig = MakeRig(kOneBuffer, FailingAt(FailKind::kWait, 1, /*times=*/2));
  std::vector<unsigned char> src = RandomBytes(kSweepBytes, 9);
  std::vector<unsigned char> device(kSweepBytes);
  absl::Status s = rig.pipeline->HostToDevice(device.data(), src.data(), kSweepBytes);
  EXPECT_THAT(MessageOf(s), HasSubstr("injected failure of Wait call #1"));
  EXPECT_EQ(rig.engine->UnconfirmedSlots(), 1);
  EXPECT_EQ(rig.engine->stats().copies_pending, 0);
  RoundTrip(rig, kSweepBytes, 10);
  ExpectClean(rig);
}

TEST(StagingPipelineTest, PersistentlyUnconfirmedBufferFailsLaterCalls) {
  // Wait fails three times: the copy, its clean-up and the next call's retry.
  Rig rig = MakeRig(kOneBuffer, FailingAt(FailKind::kWait, 1, /*times=*/3));
  std::vector<unsigned char> src = RandomBytes(kSweepBytes, 11);
  std::vector<unsigned char> device(kSweepBytes);
  EXPECT_FALSE(rig.pipeline->HostToDevice(device.data(), src.data(), kSweepBytes).ok());
  absl::Status s = rig.pipeline->DeviceToHost(src.data(), device.data(), kSweepBytes);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(MessageOf(s), HasSubstr("staging buffer 0 still has copies from an earlier "
                                      "failed call"));
  EXPECT_THAT(MessageOf(s), HasSubstr("injected failure of Wait call #3"));
  RoundTrip(rig, kSweepBytes, 12);
  ExpectClean(rig);
}

TEST(StagingPipelineTest, DestructionAfterUnconfirmedFailureIsClean) {
  std::shared_ptr<CheckingEngine::Shared> shared;
  {
    Rig rig = MakeRig(kOneBuffer, FailingAt(FailKind::kWait, 1, /*times=*/2));
    shared = rig.shared;
    std::vector<unsigned char> src = RandomBytes(kSweepBytes, 13);
    std::vector<unsigned char> device(kSweepBytes);
    EXPECT_FALSE(rig.pipeline->HostToDevice(device.data(), src.data(), kSweepBytes).ok());
  }
  ASSERT_TRUE(shared->destroyed);
  EXPECT_EQ(shared->final_stats.live_allocations, 0);
  EXPECT_EQ(shared->final_stats.copies_pending, 0);
}

// --- HostStagingEngine on its own ---------------------------------------------------

TEST(HostStagingEngineTest, CopiesInOrderAndWaitCoversRecordedPoint) {
  std::vector<int> a(100, 1), b(100, 2), dst(100, 0);
  HostStagingEngine engine({.copy_delay = std::chrono::microseconds(100)});
  EXPECT_TRUE(engine.Wait(0).ok());  // Nothing recorded: OK at once.
  ASSERT_TRUE(engine.CopyAsync(dst.data(), a.data(), 400, 0).ok());
  ASSERT_TRUE(engine.CopyAsync(dst.data(), b.data(), 400, 1).ok());
  ASSERT_TRUE(engine.Record(1).ok());
  ASSERT_TRUE(engine.Wait(1).ok());
  EXPECT_EQ(dst, b);  // FIFO: a first, then b.
  const HostStagingEngine::Stats stats = engine.stats();
  EXPECT_EQ(stats.copies_executed, 2);
  EXPECT_EQ(stats.copies_pending, 0);
  EXPECT_EQ(stats.bytes_copied, 800);
}

TEST(HostStagingEngineTest, SourceChangedWhilePendingIsDataLoss) {
  // The copy is held back until the source has changed; the hand-over through `mu`
  // orders the change before the engine's read, so this is no data race.
  std::mutex mu;
  std::condition_variable cv;
  bool changed = false;
  std::vector<unsigned char> src(64, 7), dst(64, 0);  // Outlive the engine.
  HostStagingEngine engine({.before_copy = [&](int64_t) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return changed; });
  }});
  ASSERT_TRUE(engine.CopyAsync(dst.data(), src.data(), 64, 2).ok());
  ASSERT_TRUE(engine.Record(2).ok());
  {
    std::lock_guard<std::mutex> lock(mu);
    src[3] = 8;
    changed = true;
  }
  cv.notify_all();
  absl::Status s = engine.Wait(2);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(MessageOf(s), HasSubstr("changed while the copy was pending"));
  EXPECT_EQ(engine.stats().source_mismatches, 1);
  EXPECT_EQ(dst, std::vector<unsigned char>(64, 0));  // Not copied.
  // Sticky.
  EXPECT_EQ(engine.CopyAsync(dst.data(), src.data(), 1, 0).code(),
            absl::StatusCode::kDataLoss);
}

TEST(HostStagingEngineTest, InjectedFailuresAreOneOffUnlessExecution) {
  int x = 5, y = 0;
  HostStagingEngine engine({.fail_copy_at = 2, .fail_record_at = 1, .fail_wait_at = 3});
  EXPECT_TRUE(engine.CopyAsync(&y, &x, sizeof x, 0).ok());
  absl::Status s = engine.CopyAsync(&y, &x, sizeof x, 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(MessageOf(s), "injected failure of CopyAsync call #2");
  EXPECT_TRUE(engine.CopyAsync(&y, &x, sizeof x, 0).ok());
  EXPECT_EQ(engine.Record(0).code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(engine.Record(0).ok());
  EXPECT_TRUE(engine.Wait(0).ok());
  EXPECT_TRUE(engine.Wait(0).ok());
  EXPECT_EQ(engine.Wait(0).code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(engine.Wait(0).ok());
  EXPECT_EQ(y, 5);
  EXPECT_EQ(engine.stats().copies_executed, 2);
}

TEST(HostStagingEngineTest, ExecutionFailureIsSticky) {
  int x = 5, y = 0;
  HostStagingEngine engine(
      {.copy_delay = std::chrono::milliseconds(10), .fail_execution_at = 1});
  ASSERT_TRUE(engine.CopyAsync(&y, &x, sizeof x, 0).ok());
  // Usually OK; the failing copy may have run already (sticky error) on a slow machine.
  const absl::Status recorded = engine.Record(0);
  EXPECT_TRUE(recorded.ok() || recorded.code() == absl::StatusCode::kInternal)
      << recorded;
  EXPECT_EQ(engine.Wait(0).code(), absl::StatusCode::kInternal);
  EXPECT_EQ(y, 0);
  EXPECT_EQ(engine.CopyAsync(&y, &x, sizeof x, 0).code(), absl::StatusCode::kInternal);
  EXPECT_EQ(engine.Record(0).code(), absl::StatusCode::kInternal);
}

TEST(HostStagingEngineTest, BadArgumentsAndAllocations) {
  HostStagingEngine engine;
  int x = 0;
  EXPECT_EQ(engine.CopyAsync(&x, &x, 4, -1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine.CopyAsync(nullptr, &x, 4, 0).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine.Record(-1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine.Wait(-1).code(), absl::StatusCode::kInvalidArgument);
  void* p = ValueOrThrow(engine.AllocateStaging(1000));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u);
  EXPECT_EQ(engine.stats().live_allocations, 1);
  engine.FreeStaging(&x);
  EXPECT_EQ(engine.stats().bad_frees, 1);
  engine.FreeStaging(p);
  EXPECT_EQ(engine.stats().live_allocations, 0);
  HostStagingEngine misaligned({.alignment = 3});
  EXPECT_EQ(misaligned.AllocateStaging(8).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(HostStagingEngineTest, FreeStagingWaitsForQueuedCopies) {
  std::vector<unsigned char> dst(64);
  HostStagingEngine engine({.copy_delay = std::chrono::milliseconds(20)});
  void* p = ValueOrThrow(engine.AllocateStaging(64));
  std::memset(p, 1, 64);
  ASSERT_TRUE(engine.CopyAsync(dst.data(), p, 64, 0).ok());
  engine.FreeStaging(p);  // Must not free under the pending copy (ASan would say).
  EXPECT_EQ(engine.stats().copies_pending, 0);
  EXPECT_EQ(dst, std::vector<unsigned char>(64, 1));
}

}  // namespace
}  // namespace genesis::transfer
