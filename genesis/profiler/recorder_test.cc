#include "genesis/profiler/recorder.h"

#include <atomic>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/observer.h"
#include "genesis/memory/test_backend.h"

namespace genesis::profiler {
namespace {

using memory::AllocatorOptions;
using memory::CachingAllocator;
using memory::TestBackend;

std::unique_ptr<CachingAllocator> MakePool(TestBackend::Options backend = {},
                                           AllocatorOptions options = {}) {
  return *CachingAllocator::Create(std::make_unique<TestBackend>(backend), options);
}

std::vector<Event> OfKinds(const History& h, std::initializer_list<EventKind> kinds) {
  std::vector<Event> out;
  for (const Event& e : h.events) {
    for (EventKind k : kinds) {
      if (e.kind == k) out.push_back(e);
    }
  }
  return out;
}

TEST(RecorderTest, EventsMatchAModelOfTheAllocations) {
  auto pool = MakePool();
  auto recorder = *Recorder::Create(RecorderOptions());
  ASSERT_TRUE(recorder->Attach(pool.get(), "cpu", "test").ok());
  // The model: what was asked, in order; the second round of the same sizes is served
  // from the thread cache (the fast path).
  const std::vector<size_t> sizes = {100, 4096, 3 << 20, 700};
  std::vector<std::pair<EventKind, size_t>> model;
  for (int round = 0; round < 2; ++round) {
    std::vector<void*> ptrs;
    for (size_t s : sizes) {
      ptrs.push_back(*pool->Allocate(s, 0));
      model.push_back({EventKind::kAlloc, s});
    }
    for (size_t i = 0; i < ptrs.size(); ++i) {
      ASSERT_TRUE(pool->Free(ptrs[i]).ok());
      model.push_back({EventKind::kFree, sizes[i]});
    }
  }
  recorder->Mark("done");
  ASSERT_TRUE(recorder->Stop().ok());
  void* after = *pool->Allocate(100);  // Not recorded.
  ASSERT_TRUE(pool->Free(after).ok());

  const History h = recorder->Collect();
  const std::vector<Event> blocks = OfKinds(h, {EventKind::kAlloc, EventKind::kFree});
  ASSERT_EQ(blocks.size(), model.size());
  std::map<uint64_t, uint64_t> live;  // address -> size
  for (size_t i = 0; i < blocks.size(); ++i) {
    EXPECT_EQ(blocks[i].kind, model[i].first) << i;
    EXPECT_EQ(blocks[i].requested, model[i].second) << i;
    EXPECT_GE(blocks[i].size, model[i].second) << i;
    EXPECT_EQ(blocks[i].source, 0);
    if (blocks[i].kind == EventKind::kAlloc) {
      EXPECT_TRUE(live.emplace(blocks[i].address, blocks[i].size).second);
    } else {
      ASSERT_EQ(live.count(blocks[i].address), 1u) << i;
      EXPECT_EQ(live[blocks[i].address], blocks[i].size);
      live.erase(blocks[i].address);
    }
  }
  EXPECT_TRUE(live.empty());
  // Round one misses where it needs a new segment (the first small and the large
  // block), round two hits the thread cache.
  EXPECT_FALSE(blocks[0].cache_hit);
  EXPECT_TRUE(blocks[1].cache_hit);
  EXPECT_FALSE(blocks[2].cache_hit);
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_FALSE(blocks[i].from_thread_cache) << i;
    EXPECT_TRUE(blocks[2 * sizes.size() + i].cache_hit) << i;
    EXPECT_TRUE(blocks[2 * sizes.size() + i].from_thread_cache) << i;
  }
  EXPECT_TRUE(blocks[0].small_pool);
  EXPECT_FALSE(blocks[2].small_pool);
  EXPECT_GT(blocks[0].duration_ns, 0);
  EXPECT_EQ(OfKinds(h, {EventKind::kSegmentAlloc}).size(), 2u);  // small + large
  const auto markers = OfKinds(h, {EventKind::kMarker});
  ASSERT_EQ(markers.size(), 1u);
  EXPECT_EQ(h.markers.at(markers[0].aux), "done");
  EXPECT_EQ(h.dropped_events, 0u);
  for (size_t i = 1; i < h.events.size(); ++i) {
    EXPECT_LE(h.events[i - 1].time_ns, h.events[i].time_ns);
  }
}

TEST(RecorderTest, ExpandableSegmentsReportMapsAndUnmaps) {
  TestBackend::Options backend;
  backend.virtual_memory = true;
  auto pool = MakePool(backend);
  auto recorder = *Recorder::Create(RecorderOptions());
  ASSERT_TRUE(recorder->Attach(pool.get(), "cpu", "test").ok());
  void* p = *pool->Allocate(5 << 20);
  ASSERT_TRUE(pool->Free(p).ok());
  ASSERT_TRUE(pool->EmptyCache().ok());
  ASSERT_TRUE(recorder->Stop().ok());
  const History h = recorder->Collect();
  const auto maps = OfKinds(h, {EventKind::kSegmentMap});
  const auto unmaps = OfKinds(h, {EventKind::kSegmentUnmap});
  ASSERT_FALSE(maps.empty());
  ASSERT_FALSE(unmaps.empty());
  uint64_t mapped = 0, unmapped = 0;
  for (const Event& e : maps) mapped += e.size;
  for (const Event& e : unmaps) unmapped += e.size;
  EXPECT_GE(mapped, uint64_t{5} << 20);
  EXPECT_EQ(mapped, unmapped);
}

TEST(RecorderTest, OutOfMemoryKeepsThePoolsState) {
  TestBackend::Options backend;
  backend.capacity = 32 << 20;
  auto pool = MakePool(backend);
  auto recorder = *Recorder::Create(RecorderOptions());
  ASSERT_TRUE(recorder->Attach(pool.get(), "cpu", "test").ok());
  void* p = *pool->Allocate(4 << 20);
  EXPECT_FALSE(pool->Allocate(64 << 20).ok());
  ASSERT_TRUE(pool->Free(p).ok());
  const History h = recorder->Collect();
  const auto ooms = OfKinds(h, {EventKind::kOom});
  ASSERT_EQ(ooms.size(), 1u);
  EXPECT_EQ(ooms[0].requested, uint64_t{64} << 20);
  ASSERT_EQ(h.oom_states.size(), 1u);
  EXPECT_EQ(h.oom_states[ooms[0].aux].all.allocated_bytes.current, 4 << 20);
  EXPECT_EQ(h.oom_states[ooms[0].aux].num_ooms, 1);
}

TEST(RecorderTest, FullRingsDropTheOldestAndSayHowMany) {
  auto pool = MakePool();
  RecorderOptions options;
  options.ring_events = 16;
  auto recorder = *Recorder::Create(options);
  ASSERT_TRUE(recorder->Attach(pool.get(), "cpu", "test").ok());
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(pool->Free(*pool->Allocate(100)).ok());
  const History h = recorder->Collect();
  EXPECT_EQ(h.events.size(), 16u);
  // 1 segment_alloc + 100 allocs + 100 frees.
  EXPECT_EQ(h.dropped_events, 201u - 16u);
  EXPECT_EQ(h.events.back().kind, EventKind::kFree);
}

TEST(RecorderTest, ThreadsRecordIntoTheirOwnRings) {
  auto pool = MakePool();
  auto recorder = *Recorder::Create(RecorderOptions());
  ASSERT_TRUE(recorder->Attach(pool.get(), "cpu", "test").ok());
  std::vector<std::thread> threads;
  std::atomic<bool> go{true};
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        ASSERT_TRUE(pool->Free(*pool->Allocate(64 * (i % 5 + 1))).ok());
      }
    });
  }
  // Collecting while they run is safe.
  for (int i = 0; i < 5 && go; ++i) (void)recorder->Collect();
  for (auto& t : threads) t.join();
  ASSERT_TRUE(recorder->Stop().ok());
  const History h = recorder->Collect();
  EXPECT_EQ(h.num_threads, 3);
  EXPECT_EQ(OfKinds(h, {EventKind::kAlloc}).size(), 6000u);
  EXPECT_EQ(OfKinds(h, {EventKind::kFree}).size(), 6000u);
}

TEST(RecorderTest, StacksAreRecordedWhenAsked) {
  auto pool = MakePool();
  RecorderOptions options;
  options.stacks = true;
  auto recorder = *Recorder::Create(options);
  ASSERT_TRUE(recorder->Attach(pool.get(), "cpu", "test").ok());
  ASSERT_TRUE(pool->Free(*pool->Allocate(100)).ok());
  const History h = recorder->Collect();
  ASSERT_FALSE(h.stacks.empty());
  for (const Event& e : OfKinds(h, {EventKind::kAlloc, EventKind::kFree})) {
    EXPECT_GE(e.stack, 0);
  }
}

// Fast-path events (written by the pool into the thread's log) get the block's size, the
// pool and the thread when collected.
TEST(RecorderTest, FastPathEventsCarryTheBlockSizeAndPool) {
  auto small = MakePool();
  AllocatorOptions coarse;
  coarse.block_rounding = 4096;
  auto large = MakePool({}, coarse);
  auto recorder = *Recorder::Create(RecorderOptions());
  ASSERT_TRUE(recorder->Attach(small.get(), "cpu", "small").ok());
  ASSERT_TRUE(recorder->Attach(large.get(), "cpu", "coarse").ok());
  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE(small->Free(*small->Allocate(0)).ok());
    ASSERT_TRUE(large->Free(*large->Allocate(3 << 20)).ok());
    ASSERT_TRUE(large->Free(*large->Allocate(5000)).ok());
  }
  ASSERT_TRUE(recorder->Stop().ok());
  const History h = recorder->Collect();
  std::vector<Event> fast;
  for (const Event& e : OfKinds(h, {EventKind::kAlloc, EventKind::kFree})) {
    if (e.from_thread_cache && e.kind == EventKind::kAlloc) fast.push_back(e);
  }
  ASSERT_EQ(fast.size(), 3u);
  EXPECT_EQ(fast[0].source, 0);
  EXPECT_EQ(fast[0].requested, 0u);
  EXPECT_EQ(fast[0].size, 512u);
  EXPECT_TRUE(fast[0].small_pool);
  EXPECT_EQ(fast[1].source, 1);
  EXPECT_EQ(fast[1].size, uint64_t{3} << 20);
  EXPECT_FALSE(fast[1].small_pool);
  EXPECT_EQ(fast[2].size, 8192u);
  EXPECT_TRUE(fast[2].small_pool);
  for (const Event& e : fast) {
    EXPECT_TRUE(e.cache_hit);
    EXPECT_EQ(e.thread, h.events.front().thread);
  }
}

// Beside another observer, the pool reports its fast path through OnFastEvent.
TEST(RecorderTest, RecordsBesideAnotherObserver) {
  struct Counting : memory::AllocatorObserver {
    std::atomic<int> events{0};
    void OnEvent(const memory::AllocatorEvent&) override { ++events; }
  };
  auto pool = MakePool();
  auto recorder = *Recorder::Create(RecorderOptions());
  ASSERT_TRUE(recorder->Attach(pool.get(), "cpu", "test").ok());
  ASSERT_TRUE(pool->Free(*pool->Allocate(100)).ok());
  ASSERT_TRUE(pool->Free(*pool->Allocate(100)).ok());  // Into the log.
  auto counting = std::make_shared<Counting>();
  pool->AddObserver(counting);
  ASSERT_TRUE(pool->Free(*pool->Allocate(100)).ok());  // Through OnFastEvent.
  pool->RemoveObserver(counting.get());
  ASSERT_TRUE(pool->Free(*pool->Allocate(100)).ok());  // Into the log again.
  ASSERT_TRUE(recorder->Stop().ok());
  EXPECT_EQ(counting->events.load(), 2);
  const History h = recorder->Collect();
  EXPECT_EQ(OfKinds(h, {EventKind::kAlloc}).size(), 4u);
  EXPECT_EQ(OfKinds(h, {EventKind::kFree}).size(), 4u);
}

TEST(RecorderTest, BadOptionsAndMisuseAreErrors) {
  RecorderOptions zero;
  zero.ring_events = 0;
  EXPECT_EQ(Recorder::Create(zero).status().code(), absl::StatusCode::kInvalidArgument);
  RecorderOptions absurd;
  absurd.ring_events = size_t{1} << 40;
  EXPECT_EQ(Recorder::Create(absurd).status().code(), absl::StatusCode::kInvalidArgument);
  RecorderOptions depth;
  depth.stack_depth = 1000;
  EXPECT_EQ(Recorder::Create(depth).status().code(), absl::StatusCode::kInvalidArgument);
  RecorderOptions tick;
  tick.tick_ns = 0;
  EXPECT_EQ(Recorder::Create(tick).status().code(), absl::StatusCode::kInvalidArgument);

  auto pool = MakePool();
  auto recorder = *Recorder::Create(RecorderOptions());
  EXPECT_EQ(recorder->Attach(nullptr, "cpu", "x").code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(recorder->Attach(pool.get(), "cpu", "x").ok());
  EXPECT_EQ(recorder->Attach(pool.get(), "cpu", "x").code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(recorder->Stop().ok());
  EXPECT_EQ(recorder->Stop().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(recorder->Attach(pool.get(), "cpu", "x").code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace genesis::profiler
