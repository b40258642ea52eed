// Expandable segments over the host emulation of virtual memory: growth in place, memory
// moved from idle chunks instead of new memory, hysteresis, limits, failures, streams.
#include <cstdint>
#include <atomic>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "genesis/memory/allocator_suite.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/fake_stream_events.h"
#include "genesis/memory/host_backend.h"
#include "genesis/memory/memory_stats.h"
#include "genesis/memory/test_backend.h"

namespace genesis::memory {
namespace {

using ::testing::HasSubstr;

struct Pool {
  std::unique_ptr<CachingAllocator> pool;
  std::shared_ptr<const TestBackend::State> state;
  TestBackend* backend = nullptr;

  void* Alloc(size_t bytes, StreamId stream = kNoStream) {
    absl::StatusOr<void*> p = pool->Allocate(bytes, stream);
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? *p : nullptr;
  }
  void Free(void* p) { ASSERT_TRUE(pool->Free(p).ok()); }
  int64_t reserved() const { return pool->Stats().all.reserved_bytes.current; }
};

// Without thread caches (unless asked for), so that every free reaches the pool at once,
// and mapping just what each request needs (unless `min_map` says otherwise), so that
// the tests can count chunks.
Pool MakePool(size_t capacity = kNoLimit, AllocatorOptions options = {},
              bool thread_caches = false, size_t min_map = 0) {
  if (!thread_caches) options.thread_cache_blocks = 0;
  options.expandable_min_map = min_map;
  auto backend = TestBackend::FakeCuda(capacity, /*virtual_memory=*/true);
  Pool p;
  p.backend = backend.get();
  p.state = backend->state();
  auto pool = CachingAllocator::Create(std::move(backend), std::move(options),
                                       std::make_unique<FakeStreamEvents>());
  EXPECT_TRUE(pool.ok()) << pool.status();
  if (pool.ok()) p.pool = *std::move(pool);
  return p;
}

const auto At = [](void* base, size_t offset) {
  return static_cast<void*>(static_cast<char*>(base) + offset);
};

TEST(ExpandableSegmentsTest, LargeBlocksGrowOneRangeInPlace) {
  Pool p = MakePool();
  ASSERT_TRUE(p.pool->expandable_segments());
  void* a = p.Alloc(8 * kMiB);
  void* b = p.Alloc(8 * kMiB);
  void* c = p.Alloc(3 * kMiB);
  EXPECT_EQ(b, At(a, 8 * kMiB));
  EXPECT_EQ(c, At(a, 16 * kMiB));
  // Blocks are exact (rounded to 512 bytes); memory is mapped in 2 MiB chunks.
  EXPECT_EQ(p.pool->AllocationSize(c), 3 * kMiB);
  MemoryStats st = p.pool->Stats();
  EXPECT_EQ(st.all.allocated_bytes.current, static_cast<int64_t>(19 * kMiB));
  EXPECT_EQ(st.all.reserved_bytes.current, static_cast<int64_t>(20 * kMiB));
  EXPECT_EQ(st.num_segments, 1);
  EXPECT_EQ(st.num_maps, 3);
  EXPECT_EQ(p.state->mapped_bytes(), 20 * kMiB);
  // The next block starts in the chunk `c` left half used: only 2 MiB more is mapped.
  void* d = p.Alloc(2 * kMiB);
  EXPECT_EQ(d, At(a, 19 * kMiB));
  EXPECT_EQ(p.reserved(), static_cast<int64_t>(22 * kMiB));
  auto snap = p.pool->Snapshot();
  ASSERT_EQ(snap.size(), 1u);
  EXPECT_TRUE(snap[0].expandable);
  EXPECT_EQ(snap[0].mapped_bytes, 22 * kMiB);
  EXPECT_EQ(snap[0].blocks.back().state, CachingAllocator::BlockState::kUnmapped);
  for (void* x : {a, b, c, d}) p.Free(x);
  EXPECT_EQ(CheckPoolInvariants(*p.pool), "");
}

// With thread caches, b sits in the freeing thread's cache: the pool takes it back
// before mapping more, instead of keeping its memory mapped for b's size alone.
TEST(ExpandableSegmentsTest, IdleMemoryMovesWhereItIsNeeded) {
  for (bool thread_caches : {false, true}) {
    SCOPED_TRACE(thread_caches ? "thread caches" : "no thread caches");
    Pool p = MakePool(kNoLimit, {}, thread_caches);
    void* a = p.Alloc(8 * kMiB);
    void* b = p.Alloc(8 * kMiB);
    void* c = p.Alloc(8 * kMiB);
    p.Free(b);
    if (thread_caches) {
      // An 8 MiB request takes b back from the thread cache, without the pool.
      EXPECT_EQ(p.Alloc(8 * kMiB), b);
      p.Free(b);
    }
    // 12 MiB fits no free block. Classic segments would add 12 MiB (36 MiB reserved);
    // here b's 8 MiB is unmapped and 12 MiB mapped at the end: 28 MiB.
    void* d = p.Alloc(12 * kMiB);
    EXPECT_EQ(d, At(a, 24 * kMiB));
    MemoryStats st = p.pool->Stats();
    EXPECT_EQ(st.all.reserved_bytes.current, static_cast<int64_t>(28 * kMiB));
    EXPECT_EQ(st.all.reserved_bytes.peak, static_cast<int64_t>(28 * kMiB));
    EXPECT_EQ(st.num_unmaps, 1);
    EXPECT_EQ(st.num_maps, 4);
    EXPECT_EQ(p.state->mapped_bytes(), 28 * kMiB);
    EXPECT_EQ(CheckPoolInvariants(*p.pool), "");
    // The hole maps again when a block needs it.
    void* e = p.Alloc(8 * kMiB);
    EXPECT_EQ(e, b);
    EXPECT_EQ(p.reserved(), static_cast<int64_t>(36 * kMiB));
    for (void* x : {a, c, d, e}) p.Free(x);
    ASSERT_TRUE(p.pool->EmptyCache().ok());
    EXPECT_EQ(CheckPoolInvariants(*p.pool), "");
  }
}

// Memory is mapped in pieces of up to expandable_piece_size and goes back a whole piece
// at a time: the pool never asks to unmap part of a piece (TestBackend's virtual memory
// refuses that and records it), and what it reports reserved is what is mapped.
// Both layouts (aligned pieces, pure or with small pieces joined, and whole pieces).
TEST(ExpandableSegmentsTest, MemoryGoesBackWholePieces) {
  for (size_t min_piece : {2 * kMiB, 4 * kMiB})
  for (auto [cache_limit, layout] :
       {std::pair{kNoLimit, PieceLayout::kAligned}, std::pair{size_t{0}, PieceLayout::kAligned},
        std::pair{kNoLimit, PieceLayout::kWhole}, std::pair{size_t{0}, PieceLayout::kWhole}}) {
    SCOPED_TRACE(cache_limit == 0 ? "cache_limit 0" : "no cache limit");
    SCOPED_TRACE(layout == PieceLayout::kWhole ? "whole pieces" : "aligned pieces");
    SCOPED_TRACE(min_piece);
    AllocatorOptions options;
    options.expandable_piece_size = 8 * kMiB;
    options.expandable_min_piece = min_piece;
    options.expandable_piece_layout = layout;
    options.cache_limit = cache_limit;
    Pool p = MakePool(kNoLimit, options);
    auto consistent = [&] {
      EXPECT_THAT(p.state->violations(), ::testing::IsEmpty());
      EXPECT_EQ(static_cast<int64_t>(p.state->mapped_bytes()), p.reserved());
      EXPECT_EQ(CheckPoolInvariants(*p.pool), "");
    };
    // One 96 MiB map: 12 pieces of 8 MiB at most, most of them under two blocks.
    void* all = p.Alloc(96 * kMiB);
    p.Free(all);
    std::vector<void*> blocks;
    for (int i = 0; i < 16; ++i) blocks.push_back(p.Alloc(6 * kMiB));
    consistent();
    // Every other block free: each 6 MiB hole shares its pieces with live neighbours.
    for (int i = 1; i < 16; i += 2) p.Free(blocks[i]);
    consistent();
    // 20 MiB fits no hole; the pool grows, unmapping only pieces wholly free.
    void* big = p.Alloc(20 * kMiB);
    ASSERT_NE(big, nullptr);
    consistent();
    // Frees merge the holes: whole pieces can then go back.
    for (int i = 0; i < 16; i += 2) p.Free(blocks[i]);
    void* bigger = p.Alloc(60 * kMiB);
    ASSERT_NE(bigger, nullptr);
    consistent();
    p.Free(big);
    p.Free(bigger);
    consistent();
    ASSERT_TRUE(p.pool->EmptyCache().ok());
    consistent();
    EXPECT_EQ(p.reserved(), 0);
    EXPECT_EQ(p.state->mapped_bytes(), 0u);
  }
}

// expandable_min_piece reaches the virtual memory: a 12 MiB map after the first chunk is
// cut 2, 4, 4, 2 MiB purely aligned, and 6, 6 MiB when pieces below 4 MiB join.
TEST(ExpandableSegmentsTest, SmallPiecesOfAMapJoinTheirNeighbours) {
  for (const auto& [min_piece, first_piece] :
       {std::pair{2 * kMiB, 2 * kMiB}, std::pair{4 * kMiB, 6 * kMiB}}) {
    SCOPED_TRACE(min_piece);
    AllocatorOptions options;
    options.expandable_piece_size = 8 * kMiB;
    options.expandable_min_piece = min_piece;
    Pool p = MakePool(kNoLimit, options);
    auto* first = static_cast<char*>(p.Alloc(2 * kMiB));
    void* second = p.Alloc(12 * kMiB);
    ASSERT_EQ(second, first + 2 * kMiB);
    const auto base = reinterpret_cast<uintptr_t>(first);
    EXPECT_EQ(p.backend->virtual_memory()->PieceAt(base + 3 * kMiB),
              std::make_pair(base + 2 * kMiB, base + 2 * kMiB + first_piece));
    p.Free(second);
    p.Free(first);
    EXPECT_THAT(p.state->violations(), ::testing::IsEmpty());
  }
}

// Growth maps at least expandable_min_map, so that later requests land in what is
// already mapped; memory still goes back a whole piece at a time.
TEST(ExpandableSegmentsTest, GrowthMapsAtLeastMinMap) {
  Pool p = MakePool(kNoLimit, {}, /*thread_caches=*/false, /*min_map=*/16 * kMiB);
  void* a = p.Alloc(3 * kMiB);
  EXPECT_EQ(p.reserved(), static_cast<int64_t>(16 * kMiB));
  void* b = p.Alloc(8 * kMiB);
  EXPECT_EQ(b, At(a, 3 * kMiB));
  EXPECT_EQ(p.pool->Stats().num_maps, 1);
  // 17 MiB are needed: 16 more are mapped, not 2.
  void* c = p.Alloc(6 * kMiB);
  EXPECT_EQ(c, At(a, 11 * kMiB));
  EXPECT_EQ(p.reserved(), static_cast<int64_t>(32 * kMiB));
  EXPECT_EQ(p.pool->Stats().num_maps, 2);
  // A request that needs more than min_map maps what it needs.
  void* d = p.Alloc(40 * kMiB);
  EXPECT_EQ(d, At(a, 17 * kMiB));
  EXPECT_EQ(p.reserved(), static_cast<int64_t>(58 * kMiB));
  EXPECT_EQ(p.pool->Stats().num_maps, 3);
  EXPECT_EQ(p.state->mapped_bytes(), 58 * kMiB);
  // `a` keeps the first map's piece, `b` in it with it.
  for (void* x : {b, c, d}) p.Free(x);
  ASSERT_TRUE(p.pool->EmptyCache().ok());
  EXPECT_EQ(p.reserved(), static_cast<int64_t>(16 * kMiB));
  EXPECT_EQ(CheckPoolInvariants(*p.pool), "");
  p.Free(a);
  ASSERT_TRUE(p.pool->EmptyCache().ok());
  EXPECT_EQ(p.reserved(), 0);
}

// Mapping ahead never passes the memory_fraction cap, and a backend that refuses the
// larger map gets the one the request needs, without an out-of-memory retry.
TEST(ExpandableSegmentsTest, MapAheadStopsAtTheCapAndAtTheCapacity) {
  {
    SCOPED_TRACE("capacity");
    Pool p = MakePool(20 * kMiB, {}, /*thread_caches=*/false, /*min_map=*/32 * kMiB);
    void* a = p.Alloc(4 * kMiB);
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(p.reserved(), static_cast<int64_t>(4 * kMiB));
    void* b = p.Alloc(14 * kMiB);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(p.reserved(), static_cast<int64_t>(18 * kMiB));
    EXPECT_EQ(p.pool->Stats().num_alloc_retries, 0);
    EXPECT_EQ(p.pool->Stats().num_ooms, 0);
    for (void* x : {a, b}) p.Free(x);
    EXPECT_EQ(CheckPoolInvariants(*p.pool), "");
  }
  {
    SCOPED_TRACE("more than any range");
    Pool p = MakePool(64 * kMiB, {}, /*thread_caches=*/false, /*min_map=*/SIZE_MAX);
    void* a = p.Alloc(3 * kMiB);
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(p.reserved(), static_cast<int64_t>(4 * kMiB));
    p.Free(a);
  }
  for (const size_t min_map : {32 * kMiB, 8 * kMiB}) {
    SCOPED_TRACE(min_map);
    AllocatorOptions capped;
    capped.memory_fraction = 0.25;  // 16 MiB of 64.
    Pool p = MakePool(64 * kMiB, capped, /*thread_caches=*/false, min_map);
    void* a = p.Alloc(2 * kMiB);
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(p.reserved(), static_cast<int64_t>(min_map > 16 * kMiB ? 2 * kMiB : min_map));
    p.Free(a);
  }
}

TEST(ExpandableSegmentsTest, PieceSizeMustBeAPowerOfTwo) {
  AllocatorOptions options;
  options.expandable_piece_size = 3 * kMiB;
  auto pool = CachingAllocator::Create(TestBackend::FakeCuda(kNoLimit, true), options,
                                       std::make_unique<FakeStreamEvents>());
  ASSERT_FALSE(pool.ok());
  EXPECT_EQ(pool.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(pool.status().message(), HasSubstr("expandable_piece_size = 3145728"));
}

// Threads on their own streams, each reusing one cached block: once each has mapped its
// block, nobody's growth takes another thread's cached block away, so the loop maps
// nothing more (no thread keeps unmapping what the next one maps again).
TEST(ExpandableSegmentsTest, ThreadsWithCachedBlocksDoNotTakeEachOthersMemory) {
  Pool p = MakePool(kNoLimit, {}, /*thread_caches=*/true);
  CachingAllocator* pool = p.pool.get();
  constexpr int kThreads = 4;
  std::atomic<int> warm{0};
  std::atomic<int64_t> maps_when_warm{-1};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const auto stream = static_cast<StreamId>(t + 1);
      auto pair = [&] {
        absl::StatusOr<void*> p = pool->Allocate(8 * kMiB, stream);
        ASSERT_TRUE(p.ok()) << p.status();
        ASSERT_TRUE(pool->Free(*p).ok());
      };
      pair();
      if (warm.fetch_add(1) + 1 == kThreads) maps_when_warm = pool->Stats().num_maps;
      while (warm.load() < kThreads) std::this_thread::yield();
      for (int i = 0; i < 2000; ++i) pair();
    });
  }
  for (std::thread& t : threads) t.join();
  const MemoryStats st = pool->Stats();
  EXPECT_EQ(st.num_maps, maps_when_warm.load());
  EXPECT_EQ(st.num_unmaps, 0);
  EXPECT_EQ(st.all.reserved_bytes.current, static_cast<int64_t>(kThreads * 8 * kMiB));
  ASSERT_TRUE(pool->EmptyCache().ok());
  EXPECT_EQ(CheckPoolInvariants(*pool), "");
}

TEST(ExpandableSegmentsTest, SteadyLoopMapsNothingOnceWarm) {
  for (size_t piece : {2 * kMiB, 32 * kMiB}) {
    SCOPED_TRACE(piece);
    AllocatorOptions options;
    options.expandable_piece_size = piece;
    Pool p = MakePool(kNoLimit, options);
    const size_t sizes[] = {3 * kMiB, 17 * kMiB + 512, 5 * kMiB, 40 * kMiB, 1 * kMiB,
                            9 * kMiB};
    int64_t maps_when_warm = 0, unmaps_when_warm = 0;
    for (int step = 0; step < 20; ++step) {
      std::vector<void*> live;
      for (int i = 0; i < 6; ++i) {
        live.push_back(p.Alloc(sizes[i]));
        // Free every other block early, as activations are.
        if (i % 2 == 1) {
          p.Free(live[i - 1]);
          live[i - 1] = nullptr;
        }
      }
      for (void* x : live) {
        if (x != nullptr) p.Free(x);
      }
      const MemoryStats st = p.pool->Stats();
      // The first iterations map and settle the layout (blocks start from one merged
      // free range; memory moves a piece at a time); after that the loop runs in
      // mapped memory.
      if (step == 2) {
        maps_when_warm = st.num_maps;
        unmaps_when_warm = st.num_unmaps;
      } else if (step > 2) {
        ASSERT_EQ(st.num_maps, maps_when_warm) << "step " << step;
        ASSERT_EQ(st.num_unmaps, unmaps_when_warm) << "step " << step;
      }
    }
    EXPECT_EQ(CheckPoolInvariants(*p.pool), "");
    EXPECT_THAT(p.state->violations(), ::testing::IsEmpty());
  }
}

TEST(ExpandableSegmentsTest, FragmentedFreeMemoryServesALargerRequest) {
  // 32 MiB of device memory: after freeing a and c, 20 of the 30 MiB are free but in
  // two 10 MiB pieces. Classic segments report OOM; expandable segments move them.
  Pool p = MakePool(32 * kMiB);
  void* a = p.Alloc(10 * kMiB);
  void* b = p.Alloc(10 * kMiB);
  void* c = p.Alloc(10 * kMiB);
  p.Free(a);
  p.Free(c);
  void* d = p.Alloc(20 * kMiB);
  ASSERT_NE(d, nullptr);
  EXPECT_LE(p.state->live_bytes(), 32 * kMiB);
  EXPECT_EQ(CheckPoolInvariants(*p.pool), "");
  // Now there is no room: a clear OOM, and the pool stays usable.
  absl::StatusOr<void*> e = p.pool->Allocate(8 * kMiB);
  ASSERT_FALSE(e.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(e.status()));
  EXPECT_THAT(e.status().message(), HasSubstr("CUDA OOM"));
  EXPECT_THAT(e.status().message(), HasSubstr("8388608 bytes"));
  EXPECT_EQ(p.pool->Stats().num_ooms, 1);
  EXPECT_EQ(CheckPoolInvariants(*p.pool), "");
  p.Free(b);
  p.Free(d);
  void* f = p.Alloc(30 * kMiB);
  p.Free(f);
  ASSERT_TRUE(p.pool->EmptyCache().ok());
  EXPECT_EQ(p.state->mapped_bytes(), 0u);
  EXPECT_EQ(p.state->live_reservations(), 0);
  EXPECT_TRUE(p.state->violations().empty());
}

TEST(ExpandableSegmentsTest, MapFailuresLeaveThePoolConsistent) {
  Pool p = MakePool();
  void* a = p.Alloc(4 * kMiB);
  // A failure other than out-of-memory is reported as such, naming the mapping.
  p.backend->FailNextAllocations(1, absl::InternalError("driver fell over"));
  absl::StatusOr<void*> b = p.pool->Allocate(6 * kMiB);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(b.status().message(), HasSubstr("driver fell over"));
  EXPECT_EQ(CheckPoolInvariants(*p.pool), "");
  // An injected out-of-memory is retried after releasing the cache; twice fails.
  p.backend->FailNextAllocations(1);
  void* c = p.Alloc(6 * kMiB);
  EXPECT_EQ(p.pool->Stats().num_alloc_retries, 1);
  p.backend->FailNextAllocations(2);
  absl::StatusOr<void*> d = p.pool->Allocate(6 * kMiB);
  EXPECT_TRUE(absl::IsResourceExhausted(d.status())) << d.status();
  EXPECT_THAT(d.status().message(), HasSubstr("injected failure"));
  EXPECT_EQ(CheckPoolInvariants(*p.pool), "");
  p.Free(a);
  p.Free(c);
}

// Unmapped memory may come back late (CudaVirtualMemory unmaps on a thread of its own
// once the device's queued work is done). TestBackend's lazy unmaps keep it counted
// until somebody waits for it: whatever needs that memory must wait.
TEST(ExpandableSegmentsTest, MemoryThatComesBackLateIsWaitedForWhereNeeded) {
  auto make = [](size_t capacity) {
    TestBackend::Options o;
    o.capacity = capacity;
    o.virtual_memory = true;
    o.lazy_unmaps = true;
    o.device = Device::Cuda(0);
    o.kind = MemoryKind::kDevice;
    auto backend = std::make_unique<TestBackend>(o);
    Pool p;
    p.state = backend->state();
    AllocatorOptions options;
    options.thread_cache_blocks = 0;
    options.expandable_min_map = 0;
    auto pool = CachingAllocator::Create(std::move(backend), options,
                                         std::make_unique<FakeStreamEvents>());
    EXPECT_TRUE(pool.ok()) << pool.status();
    if (pool.ok()) p.pool = *std::move(pool);
    return p;
  };
  {
    SCOPED_TRACE("memory moved at the capacity");
    Pool p = make(32 * kMiB);
    void* a = p.Alloc(8 * kMiB);
    void* b = p.Alloc(8 * kMiB);
    void* c = p.Alloc(8 * kMiB);
    p.Free(b);
    // b's 8 MiB are unmapped to make room, and the 12 MiB mapped at the end need them
    // back: 24 + 12 MiB would pass the capacity.
    void* d = p.Alloc(12 * kMiB);
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(p.pool->Stats().num_unmaps, 1);
    EXPECT_EQ(p.state->pending_unmap_bytes(), 0u);
    EXPECT_EQ(p.state->live_bytes(), 28 * kMiB);
    for (void* x : {a, c, d}) p.Free(x);
    EXPECT_EQ(CheckPoolInvariants(*p.pool), "");
  }
  {
    SCOPED_TRACE("a classic segment after the cache was released");
    Pool p = make(23 * kMiB);
    void* a = p.Alloc(2 * kMiB);  // Keeps the range (and its reservation) alive.
    p.Free(p.Alloc(20 * kMiB));
    // The small pool's 2 MiB segment does not fit beside the cached 20 MiB: the OOM
    // path unmaps them and must wait for their memory before asking again.
    void* small = p.Alloc(1024);
    ASSERT_NE(small, nullptr);
    EXPECT_EQ(p.pool->Stats().num_alloc_retries, 1);
    EXPECT_EQ(p.state->live_bytes(), 4 * kMiB);
    p.Free(small);
    p.Free(a);
    EXPECT_EQ(CheckPoolInvariants(*p.pool), "");
  }
  {
    SCOPED_TRACE("EmptyCache");
    Pool p = make(kNoLimit);
    void* a = p.Alloc(8 * kMiB);
    p.Free(p.Alloc(16 * kMiB));
    ASSERT_TRUE(p.pool->EmptyCache().ok());
    // What EmptyCache gave back is back when it returns.
    EXPECT_EQ(p.state->pending_unmap_bytes(), 0u);
    EXPECT_EQ(p.state->live_bytes(), 8 * kMiB);
    p.Free(a);
  }
}

TEST(ExpandableSegmentsTest, MemoryFractionCapsMappedMemory) {
  AllocatorOptions options;
  options.memory_fraction = 0.5;
  Pool p = MakePool(100 * kMiB, options);
  void* a = p.Alloc(40 * kMiB);
  absl::StatusOr<void*> b = p.pool->Allocate(20 * kMiB);
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(b.status().message(), HasSubstr("memory_fraction"));
  // Idle memory still moves under the cap.
  p.Free(a);
  void* c = p.Alloc(10 * kMiB);
  void* d = p.Alloc(38 * kMiB);
  EXPECT_LE(p.reserved(), static_cast<int64_t>(50 * kMiB));
  p.Free(c);
  p.Free(d);
  EXPECT_EQ(CheckPoolInvariants(*p.pool), "");
}

TEST(ExpandableSegmentsTest, EachStreamHasItsOwnRange) {
  Pool p = MakePool();
  void* a = p.Alloc(4 * kMiB, /*stream=*/1);
  void* b = p.Alloc(4 * kMiB, /*stream=*/2);
  p.Free(a);
  // Stream 2 does not take stream 1's free block.
  void* c = p.Alloc(4 * kMiB, /*stream=*/2);
  EXPECT_NE(c, a);
  EXPECT_EQ(p.pool->Stats().num_segments, 2);
  void* d = p.Alloc(4 * kMiB, /*stream=*/1);
  EXPECT_EQ(d, a);
  for (void* x : {b, c, d}) p.Free(x);
  EXPECT_EQ(CheckPoolInvariants(*p.pool), "");
  ASSERT_TRUE(p.pool->EmptyCache().ok());
  EXPECT_EQ(p.pool->Stats().num_segments, 0);
}

TEST(ExpandableSegmentsTest, CacheLimitUnmapsFreedChunks) {
  AllocatorOptions options;
  options.cache_limit = 0;
  Pool p = MakePool(kNoLimit, options);
  void* a = p.Alloc(8 * kMiB);
  void* b = p.Alloc(8 * kMiB);
  p.Free(a);
  EXPECT_EQ(p.reserved(), static_cast<int64_t>(8 * kMiB));
  EXPECT_EQ(p.pool->Stats().all.cached_bytes.current, 0);
  p.Free(b);
  EXPECT_EQ(p.reserved(), 0);
  EXPECT_EQ(CheckPoolInvariants(*p.pool), "");
}

TEST(ExpandableSegmentsTest, AnotherRangeWhenOneIsFull) {
  // 100 MiB of memory: each range reserves 112.5 MiB of addresses, rounded to chunks.
  Pool p = MakePool(100 * kMiB);
  void* a = p.Alloc(40 * kMiB);
  void* b = p.Alloc(40 * kMiB);
  p.Free(a);
  // 60 MiB fits nowhere in the first range; a second range takes it, with a's memory.
  void* c = p.Alloc(60 * kMiB);
  EXPECT_EQ(p.pool->Stats().num_segments, 2);
  EXPECT_LE(p.state->live_bytes(), 100 * kMiB);
  p.Free(b);
  p.Free(c);
  EXPECT_EQ(CheckPoolInvariants(*p.pool), "");
  ASSERT_TRUE(p.pool->EmptyCache().ok());
  EXPECT_EQ(p.pool->Stats().num_segments, 0);
  EXPECT_EQ(p.state->live_reservations(), 0);
}

TEST(ExpandableSegmentsTest, SettingsChooseTheSegments) {
  AllocatorOptions on;
  on.expandable_segments = ExpandableSegments::kOn;
  auto none = CachingAllocator::Create(std::make_unique<HostBackend>(), on);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(none.status().message(), HasSubstr("no virtual memory"));
  AllocatorOptions off;
  off.expandable_segments = ExpandableSegments::kOff;
  auto classic = CachingAllocator::Create(TestBackend::FakeCuda(kNoLimit, true), off);
  ASSERT_TRUE(classic.ok());
  EXPECT_FALSE((*classic)->expandable_segments());
  auto host = CachingAllocator::Create(std::make_unique<HostBackend>(), AllocatorOptions());
  ASSERT_TRUE(host.ok());
  EXPECT_FALSE((*host)->expandable_segments());
}

TEST(ExpandableSegmentsTest, PendingBlocksStayMapped) {
  Pool p = MakePool();
  void* a = p.Alloc(8 * kMiB, /*stream=*/1);
  ASSERT_TRUE(p.pool->RecordStream(a, /*stream=*/2).ok());
  p.Free(a);  // Waits for an event on stream 2.
  ASSERT_TRUE(p.pool->EmptyCache().ok());
  EXPECT_EQ(p.reserved(), static_cast<int64_t>(8 * kMiB));
  ASSERT_TRUE(p.pool->Compact().ok());  // Waits for it, then unmaps.
  EXPECT_EQ(p.reserved(), 0);
  EXPECT_EQ(CheckPoolInvariants(*p.pool), "");
}

}  // namespace
}  // namespace genesis::memory
