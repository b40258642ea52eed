// CachingAllocator behaviour that needs a controllable backend or stream events: out of
// memory, limits, stream-ordered reuse, option validation.
#include "genesis/core/byte_size.h"
#include "genesis/memory/caching_allocator.h"

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "genesis/memory/allocator_suite.h"
#include "genesis/memory/fake_stream_events.h"
#include "genesis/memory/memory_stats.h"
#include "genesis/memory/test_backend.h"

namespace genesis::memory {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct Pool {
  std::unique_ptr<CachingAllocator> pool;
  TestBackend* backend;
  std::shared_ptr<const TestBackend::State> state;
  FakeStreamEvents* events;
};

Pool MakePool(AllocatorOptions options, std::unique_ptr<TestBackend> backend) {
  Pool p;
  p.backend = backend.get();
  p.state = backend->state();
  auto events = std::make_unique<FakeStreamEvents>();
  p.events = events.get();
  auto pool = CachingAllocator::Create(std::move(backend), std::move(options),
                                       std::move(events));
  EXPECT_TRUE(pool.ok()) << pool.status();
  if (pool.ok()) p.pool = *std::move(pool);
  return p;
}

TEST(CachingAllocatorTest, RetriesOnceAfterBackendOom) {
  Pool p = MakePool({}, TestBackend::FakeCuda());
  void* cached = *p.pool->Allocate(30 * kMiB);
  ASSERT_TRUE(p.pool->Free(cached).ok());
  p.backend->FailNextAllocations(1);
  auto q = p.pool->Allocate(40 * kMiB);
  ASSERT_TRUE(q.ok()) << q.status();
  const MemoryStats st = p.pool->Stats();
  EXPECT_EQ(st.num_alloc_retries, 1);
  EXPECT_EQ(st.num_ooms, 0);
  EXPECT_EQ(st.num_segment_frees, 1);  // The cached 30 MiB segment went first.
  EXPECT_EQ(p.state->live_segments(), 1);
  ASSERT_TRUE(p.pool->Free(*q).ok());
  EXPECT_EQ(CheckPoolInvariants(*p.pool), "");
}

TEST(CachingAllocatorTest, CudaOomMessageCarriesTheNumbers) {
  Pool p = MakePool({}, TestBackend::FakeCuda(64 * kMiB));
  void* a = *p.pool->Allocate(40 * kMiB);
  auto b = p.pool->Allocate(30 * kMiB);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
  const std::string msg(b.status().message());
  EXPECT_THAT(msg, HasSubstr("CUDA OOM"));
  EXPECT_THAT(msg, HasSubstr("cuda:0"));
  EXPECT_THAT(msg, HasSubstr(absl::StrCat(30 * kMiB, " bytes (30.0 MiB)")));
  EXPECT_THAT(msg, HasSubstr(absl::StrCat(40 * kMiB, " bytes (40.0 MiB) allocated")));
  EXPECT_THAT(msg, HasSubstr(absl::StrCat(40 * kMiB, " bytes (40.0 MiB) reserved")));
  EXPECT_THAT(msg, HasSubstr(absl::StrCat(24 * kMiB, " bytes (24.0 MiB) free of ",
                                          64 * kMiB)));
  EXPECT_THAT(msg, HasSubstr("Largest free block"));
  EXPECT_THAT(msg, HasSubstr("fragmentation ratio 0.00"));
  // Advice must be true for these settings: nothing about fraction or splitting.
  EXPECT_THAT(msg, Not(HasSubstr("memory_fraction")));
  EXPECT_THAT(msg, Not(HasSubstr("max_split_size")));
  MemoryStats st = p.pool->Stats();
  EXPECT_EQ(st.num_ooms, 1);
  EXPECT_EQ(st.num_alloc_retries, 1);
  // Still usable and consistent.
  EXPECT_EQ(CheckPoolInvariants(*p.pool), "");
  ASSERT_TRUE(p.pool->Free(a).ok());
  auto c = p.pool->Allocate(30 * kMiB);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(p.pool->Free(*c).ok());
  EXPECT_EQ(CheckPoolInvariants(*p.pool), "");
}

TEST(CachingAllocatorTest, HostOomIsNamedForItsKind) {
  TestBackend::Options o;
  o.capacity = 4 * kMiB;
  Pool p = MakePool({}, std::make_unique<TestBackend>(o));
  auto b = p.pool->Allocate(8 * kMiB);
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("host OOM"));
  EXPECT_THAT(std::string(b.status().message()), Not(HasSubstr("CUDA")));
  o.kind = MemoryKind::kPinnedHost;
  Pool q = MakePool({}, std::make_unique<TestBackend>(o));
  b = q.pool->Allocate(8 * kMiB);
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("pinned host OOM"));
}

TEST(CachingAllocatorTest, FragmentationAdviceOnlyWhenTrue) {
  Pool p = MakePool({}, TestBackend::FakeCuda(40 * kMiB));
  // Two 20 MiB segments, each with 2 MiB kept: 36 MiB cached in 18 MiB holes.
  void* a = *p.pool->Allocate(2 * kMiB);
  void* fill = *p.pool->Allocate(18 * kMiB);
  void* b = *p.pool->Allocate(2 * kMiB);
  void* fill2 = *p.pool->Allocate(18 * kMiB);
  ASSERT_TRUE(p.pool->Free(fill).ok());
  ASSERT_TRUE(p.pool->Free(fill2).ok());
  auto c = p.pool->Allocate(19 * kMiB);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("max_split_size"));
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("fragmentation ratio 0.50"));
  for (void* x : {a, b}) ASSERT_TRUE(p.pool->Free(x).ok());
}

TEST(CachingAllocatorTest, MemoryFractionCapsReserved) {
  AllocatorOptions o;
  o.memory_fraction = 0.5;
  Pool p = MakePool(o, TestBackend::FakeCuda(100 * kMiB));
  void* a = *p.pool->Allocate(30 * kMiB);
  auto b = p.pool->Allocate(30 * kMiB);
  ASSERT_FALSE(b.ok());
  const std::string msg(b.status().message());
  EXPECT_THAT(msg, HasSubstr("memory_fraction = 0.5"));
  EXPECT_THAT(msg, HasSubstr(absl::StrCat(50 * kMiB)));
  EXPECT_EQ(p.state->failed_allocs(), 0);  // The pool's limit, not the backend's.
  ASSERT_TRUE(p.pool->Free(a).ok());
  auto c = p.pool->Allocate(48 * kMiB);  // Fits after releasing the cached 30 MiB.
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(p.pool->Stats().num_alloc_retries, 2);
  ASSERT_TRUE(p.pool->Free(*c).ok());
}

TEST(CachingAllocatorTest, CacheLimitReleasesLeastRecentlyUsed) {
  AllocatorOptions o;
  o.cache_limit = 40 * kMiB;
  o.adaptive_caching = false;
  Pool p = MakePool(o, TestBackend::FakeCuda());
  void* a = *p.pool->Allocate(30 * kMiB);
  void* b = *p.pool->Allocate(30 * kMiB);
  ASSERT_TRUE(p.pool->Free(a).ok());
  EXPECT_EQ(p.pool->Stats().num_segments, 2);
  ASSERT_TRUE(p.pool->Free(b).ok());  // 60 MiB cached > 40: `a`'s segment goes.
  const MemoryStats st = p.pool->Stats();
  EXPECT_EQ(st.num_segments, 1);
  EXPECT_EQ(st.all.cached_bytes.current, static_cast<int64_t>(30 * kMiB));
  auto snap = p.pool->Snapshot();
  ASSERT_EQ(snap.size(), 1u);
  EXPECT_EQ(snap[0].address, b);
}

TEST(CachingAllocatorTest, AdaptiveCachingKeepsRecurringSizes) {
  AllocatorOptions o;
  o.cache_limit = 40 * kMiB;
  Pool p = MakePool(o, TestBackend::FakeCuda());
  // 30 MiB recurs (two segments of that size); 32 MiB is seen once.
  void* a = *p.pool->Allocate(30 * kMiB);
  void* a2 = *p.pool->Allocate(30 * kMiB);
  void* b = *p.pool->Allocate(32 * kMiB);
  ASSERT_TRUE(p.pool->Free(a2).ok());
  ASSERT_TRUE(p.pool->Free(b).ok());  // Cached 62 MiB: drops the newer, one-off 32 MiB.
  auto snap = p.pool->Snapshot();
  ASSERT_EQ(snap.size(), 2u);
  for (const auto& s : snap) EXPECT_EQ(s.size, 30 * kMiB);
  ASSERT_TRUE(p.pool->Free(a).ok());
}

TEST(CachingAllocatorTest, GarbageCollectionBeforeGrowing) {
  AllocatorOptions o;
  o.garbage_collection_threshold = 0.5;
  Pool p = MakePool(o, TestBackend::FakeCuda(100 * kMiB));
  void* a = *p.pool->Allocate(30 * kMiB);
  ASSERT_TRUE(p.pool->Free(a).ok());
  void* b = *p.pool->Allocate(32 * kMiB);  // 30 + 32 > 50: the free 30 MiB goes first.
  MemoryStats st = p.pool->Stats();
  EXPECT_EQ(st.num_segment_frees, 1);
  EXPECT_EQ(st.all.reserved_bytes.current, static_cast<int64_t>(32 * kMiB));
  EXPECT_EQ(st.num_alloc_retries, 0);
  ASSERT_TRUE(p.pool->Free(b).ok());
}

TEST(CachingAllocatorTest, BackendErrorsOtherThanOomPassThrough) {
  Pool p = MakePool({}, TestBackend::FakeCuda());
  p.backend->FailNextAllocations(1, absl::InternalError("driver on fire"));
  auto a = p.pool->Allocate(4096);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(a.status().message()), HasSubstr("driver on fire"));
  EXPECT_EQ(p.pool->Stats().num_ooms, 0);
  EXPECT_EQ(CheckPoolInvariants(*p.pool), "");
}

TEST(CachingAllocatorTest, BlockRecordedOnAnotherStreamWaitsForIt) {
  AllocatorOptions o;
  o.thread_cache_blocks = 0;
  Pool p = MakePool(o, TestBackend::FakeCuda());
  constexpr StreamId kS1 = 1, kS2 = 2;
  void* a = *p.pool->Allocate(4096, kS1);
  ASSERT_TRUE(p.pool->RecordStream(a, kS2).ok());
  ASSERT_TRUE(p.pool->Free(a).ok());
  EXPECT_EQ(p.events->records(), 1);
  auto snap = p.pool->Snapshot();
  EXPECT_EQ(snap[0].blocks[0].state, CachingAllocator::BlockState::kPendingFree);
  MemoryStats st = p.pool->Stats();
  EXPECT_EQ(st.all.active_bytes.current, 4096);
  EXPECT_EQ(st.all.allocated_bytes.current, 0);
  EXPECT_EQ(CheckPoolInvariants(*p.pool), "");
  // Not reused while the marker is incomplete, even on the block's own stream.
  void* b = *p.pool->Allocate(4096, kS1);
  EXPECT_NE(b, a);
  // Empty cache cannot release the segment: it holds a pending block.
  ASSERT_TRUE(p.pool->Free(b).ok());
  ASSERT_TRUE(p.pool->EmptyCache().ok());
  EXPECT_EQ(p.pool->Stats().num_segments, 1);
  p.events->CompleteAll();
  void* c = *p.pool->Allocate(4096, kS1);
  EXPECT_EQ(c, a);
  EXPECT_EQ(p.events->releases(), 1);
  EXPECT_EQ(p.events->outstanding(), 0);
  ASSERT_TRUE(p.pool->Free(c).ok());
  EXPECT_TRUE(p.events->violations().empty());
  EXPECT_EQ(CheckPoolInvariants(*p.pool), "");
}

// The same with thread caches on, for the block this thread freed last and took again:
// the stream recorded on it sends its free to the pool, which waits for the stream.
TEST(CachingAllocatorTest, HotBlockRecordedOnAnotherStreamWaitsForIt) {
  Pool p = MakePool({}, TestBackend::FakeCuda());
  void* a = *p.pool->Allocate(4096, 1);
  ASSERT_TRUE(p.pool->Free(a).ok());
  void* b = *p.pool->Allocate(4096, 1);
  ASSERT_EQ(b, a);  // The thread cache's hot block.
  ASSERT_TRUE(p.pool->RecordStream(b, 2).ok());
  ASSERT_TRUE(p.pool->Free(b).ok());
  EXPECT_EQ(p.events->records(), 1);
  void* c = *p.pool->Allocate(4096, 1);
  EXPECT_NE(c, a);  // Not reused before the stream's work is done.
  p.events->CompleteAll();
  ASSERT_TRUE(p.pool->Free(c).ok());
  EXPECT_TRUE(p.events->violations().empty());
  EXPECT_EQ(p.pool->Stats().all.allocated_bytes.current, 0);
  EXPECT_EQ(CheckPoolInvariants(*p.pool), "");
}

TEST(CachingAllocatorTest, StreamsDoNotShareFreeBlocks) {
  Pool p = MakePool({}, TestBackend::FakeCuda());
  void* a = *p.pool->Allocate(4096, 1);
  ASSERT_TRUE(p.pool->Free(a).ok());
  void* b = *p.pool->Allocate(4096, 3);  // Another stream: a new segment.
  EXPECT_NE(b, a);
  EXPECT_EQ(p.pool->Stats().num_segments, 2);
  void* c = *p.pool->Allocate(4096, 1);  // Its own stream: reused at once.
  EXPECT_EQ(c, a);
  EXPECT_EQ(p.events->records(), 0);
  for (void* x : {b, c}) ASSERT_TRUE(p.pool->Free(x).ok());
}

TEST(CachingAllocatorTest, SynchronizesInsteadOfOom) {
  AllocatorOptions o;
  o.thread_cache_blocks = 0;
  Pool p = MakePool(o, TestBackend::FakeCuda(20 * kMiB));
  void* a = *p.pool->Allocate(20 * kMiB, 1);
  ASSERT_TRUE(p.pool->RecordStream(a, 2).ok());
  ASSERT_TRUE(p.pool->Free(a).ok());
  auto b = p.pool->Allocate(20 * kMiB, 1);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*b, a);
  EXPECT_EQ(p.events->synchronizes(), 1);
  EXPECT_EQ(p.pool->Stats().num_ooms, 0);
  ASSERT_TRUE(p.pool->Free(*b).ok());
}

TEST(CachingAllocatorTest, CompactWaitsForEvents) {
  Pool p = MakePool({}, TestBackend::FakeCuda());
  void* a = *p.pool->Allocate(30 * kMiB, 1);
  ASSERT_TRUE(p.pool->RecordStream(a, 2).ok());
  ASSERT_TRUE(p.pool->Free(a).ok());
  ASSERT_TRUE(p.pool->EmptyCache().ok());
  EXPECT_EQ(p.pool->Stats().num_segments, 1);
  ASSERT_TRUE(p.pool->Compact().ok());
  EXPECT_EQ(p.pool->Stats().num_segments, 0);
  EXPECT_EQ(p.state->live_segments(), 0);
  EXPECT_EQ(p.events->outstanding(), 0);
}

TEST(CachingAllocatorTest, RecordStreamNeedsEvents) {
  auto pool = *CachingAllocator::Create(std::make_unique<TestBackend>(), {});
  void* a = *pool->Allocate(100);
  EXPECT_TRUE(pool->RecordStream(a, kNoStream).ok());
  absl::Status s = pool->RecordStream(a, 5);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(pool->Free(a).ok());
}

TEST(CachingAllocatorTest, DestructionReturnsEverySegment) {
  std::shared_ptr<const TestBackend::State> state;
  {
    Pool p = MakePool({}, TestBackend::FakeCuda());
    state = p.state;
    void* leaked = *p.pool->Allocate(5000);
    (void)leaked;
    void* b = *p.pool->Allocate(50 * kMiB, 1);
    ASSERT_TRUE(p.pool->RecordStream(b, 2).ok());
    ASSERT_TRUE(p.pool->Free(b).ok());
  }
  EXPECT_EQ(state->live_segments(), 0);
  EXPECT_EQ(state->segment_allocs(), 2);
  EXPECT_TRUE(state->violations().empty());
}

// Classic segments: growing past the reserved high-water mark first returns fully
// free segments (least recently used first), just enough to stay at the mark.
TEST(CachingAllocatorTest, GrowingPastTheHighWaterMarkReleasesFreeSegments) {
  AllocatorOptions o;
  o.expandable_segments = ExpandableSegments::kOff;
  o.thread_cache_blocks = 0;
  Pool p = MakePool(o, TestBackend::FakeCuda());
  void* a = *p.pool->Allocate(30 * kMiB);
  void* b = *p.pool->Allocate(30 * kMiB);
  void* c = *p.pool->Allocate(30 * kMiB);  // High-water mark: 90 MiB.
  for (void* x : {a, b, c}) ASSERT_TRUE(p.pool->Free(x).ok());
  void* d = *p.pool->Allocate(40 * kMiB);  // No free block fits: two 30s go first.
  MemoryStats st = p.pool->Stats();
  EXPECT_EQ(st.num_segments, 2);
  EXPECT_EQ(st.all.reserved_bytes.current, static_cast<int64_t>(70 * kMiB));
  EXPECT_EQ(st.all.reserved_bytes.peak, static_cast<int64_t>(90 * kMiB));
  auto snap = p.pool->Snapshot();
  ASSERT_EQ(snap.size(), 2u);
  EXPECT_TRUE(snap[0].address == c || snap[1].address == c);  // The most recent 30 stays.
  // Below the mark nothing goes back: a loop over these sizes reuses what it has.
  const int64_t allocs = st.num_segment_allocs;
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(p.pool->Free(d).ok());
    void* e = *p.pool->Allocate(30 * kMiB);
    void* f = *p.pool->Allocate(35 * kMiB);
    ASSERT_TRUE(p.pool->Free(e).ok());
    ASSERT_TRUE(p.pool->Free(f).ok());
    d = *p.pool->Allocate(40 * kMiB);
  }
  EXPECT_EQ(p.pool->Stats().num_segment_allocs, allocs);
  ASSERT_TRUE(p.pool->Free(d).ok());
}

TEST(CachingAllocatorTest, RoundupPowerOfTwoDivisions) {
  AllocatorOptions o;
  o.roundup_power2_divisions = 4;
  Pool p = MakePool(o, TestBackend::FakeCuda());
  void* a = *p.pool->Allocate(1100 * 1024);  // Between 1 and 2 MiB: steps of 256 KiB.
  EXPECT_EQ(p.pool->AllocationSize(a), 1280u * 1024);
  void* b = *p.pool->Allocate(600);
  EXPECT_EQ(p.pool->AllocationSize(b), 1024u);
  for (void* x : {a, b}) ASSERT_TRUE(p.pool->Free(x).ok());
}

TEST(CachingAllocatorTest, MaxSplitSizeKeepsLargeBlocksWhole) {
  AllocatorOptions o;
  o.max_split_size = 16 * kMiB;
  o.thread_cache_blocks = 0;
  Pool p = MakePool(o, TestBackend::FakeCuda());
  // An older free segment, so that growing for `small` returns it rather than `big`
  // (GrowingPastTheHighWaterMarkReleasesFreeSegments).
  void* pad = *p.pool->Allocate(30 * kMiB);
  void* big = *p.pool->Allocate(40 * kMiB);
  ASSERT_TRUE(p.pool->Free(pad).ok());
  ASSERT_TRUE(p.pool->Free(big).ok());
  void* small = *p.pool->Allocate(4 * kMiB);  // Does not carve the 40 MiB block.
  EXPECT_FALSE(small >= big && small < static_cast<char*>(big) + 40 * kMiB);
  void* again = *p.pool->Allocate(39 * kMiB);  // Oversize block, little waste: reused.
  EXPECT_EQ(again, big);
  for (void* x : {small, again}) ASSERT_TRUE(p.pool->Free(x).ok());
}

TEST(CachingAllocatorTest, ValidatesOptionsNamingTheValue) {
  auto check = [](AllocatorOptions o, const std::string& needle) {
    auto pool = CachingAllocator::Create(std::make_unique<TestBackend>(), o);
    ASSERT_FALSE(pool.ok()) << needle;
    EXPECT_EQ(pool.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(pool.status().message()), HasSubstr(needle));
  };
  AllocatorOptions o;
  o.block_rounding = 768;
  check(o, "block_rounding = 768");
  o = {};
  o.block_rounding = 256;
  check(o, "block_rounding = 256");
  o = {};
  o.memory_fraction = 0;
  check(o, "memory_fraction = 0");
  o = {};
  o.memory_fraction = 1.5;
  check(o, "memory_fraction = 1.5");
  o = {};
  o.roundup_power2_divisions = 3;
  check(o, "roundup_power2_divisions = 3");
  o = {};
  o.roundup_power2_divisions = 128;
  check(o, "roundup_power2_divisions = 128");
  o = {};
  o.small_segment_size = 512 * 1024;
  check(o, "small_segment_size = 524288");
  o = {};
  o.garbage_collection_threshold = -0.1;
  check(o, "garbage_collection_threshold = -0.1");
  o = {};
  o.max_split_size = 1000;
  check(o, "max_split_size = 1000");
  o = {};
  o.large_segment_rounding = 3 * kMiB;
  check(o, "large_segment_rounding = 3145728");
  o = {};
  o.large_segment_max = 20 * kMiB + 100;
  check(o, "large_segment_max = 20971620");
  o = {};
  o.thread_cache_blocks = -1;
  check(o, "thread_cache_blocks = -1");
  EXPECT_FALSE(CachingAllocator::Create(nullptr, {}).ok());
  TestBackend::Options bo;
  bo.alignment = 256;
  auto pool = CachingAllocator::Create(std::make_unique<TestBackend>(bo), {});
  ASSERT_FALSE(pool.ok());
  EXPECT_THAT(std::string(pool.status().message()), HasSubstr("alignment 256"));
}

TEST(CachingAllocatorTest, ThreadCacheFlushedAtThreadExit) {
  Pool p = MakePool({}, TestBackend::FakeCuda());
  std::thread t([&] {
    void* a = *p.pool->Allocate(4096);
    ASSERT_TRUE(p.pool->Free(a).ok());  // Into this thread's cache.
  });
  t.join();
  auto snap = p.pool->Snapshot();
  ASSERT_EQ(snap.size(), 1u);
  ASSERT_EQ(snap[0].blocks.size(), 1u);  // Merged back at thread exit.
  EXPECT_FALSE(snap[0].blocks[0].in_thread_cache);
  EXPECT_EQ(CheckPoolInvariants(*p.pool), "");
}

// Whether the block at `p` is a free block held in a thread cache.
bool InThreadCache(const CachingAllocator& pool, const void* p) {
  for (const auto& segment : pool.Snapshot()) {
    for (const auto& block : segment.blocks) {
      if (block.address == p) return block.in_thread_cache;
    }
  }
  return false;
}

// A block allocated from the pool and freed at once, with no room for it in the thread's
// cache, stays with the thread until its next call: the same request again gets it
// back; any other call gives it back to the pool first.
TEST(CachingAllocatorTest, AFreshBlockWithoutRoomStaysWithTheThreadUntilItsNextCall) {
  AllocatorOptions o;
  o.thread_cache_bytes = 1 * kMiB;
  Pool p = MakePool(o, TestBackend::FakeCuda());
  void* small = *p.pool->Allocate((kMiB / 2));
  ASSERT_TRUE(p.pool->Free(small).ok());  // Cached: 512 KiB of the thread's 1 MiB.
  void* big = *p.pool->Allocate(1 * kMiB);
  ASSERT_TRUE(p.pool->Free(big).ok());
  EXPECT_TRUE(InThreadCache(*p.pool, big));
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(*p.pool->Allocate(1 * kMiB), big);
    ASSERT_TRUE(p.pool->Free(big).ok());
  }
  MemoryStats st = p.pool->Stats();
  EXPECT_EQ(st.all.allocated_bytes.current, 0);
  EXPECT_EQ(st.all.allocated_bytes.peak, static_cast<int64_t>(1 * kMiB));
  EXPECT_EQ(st.num_allocations, 5);
  EXPECT_EQ(CheckPoolInvariants(*p.pool), "");

  void* other = *p.pool->Allocate(4096);  // Another call: big goes back.
  EXPECT_FALSE(InThreadCache(*p.pool, big));
  void* again = *p.pool->Allocate(1 * kMiB);  // Through the pool now.
  EXPECT_EQ(CheckPoolInvariants(*p.pool), "");
  ASSERT_TRUE(p.pool->Free(again).ok());
  ASSERT_TRUE(p.pool->Free(other).ok());
  st = p.pool->Stats();
  EXPECT_EQ(st.all.allocated_bytes.current, 0);
  EXPECT_EQ(st.num_allocations, 7);
  EXPECT_EQ(st.num_frees, 7);
  EXPECT_EQ(CheckPoolInvariants(*p.pool), "");
}

// EmptyCache on another thread takes a block held that way, like every cached block.
TEST(CachingAllocatorTest, EmptyCacheTakesABlockAnotherThreadHolds) {
  AllocatorOptions o;
  o.thread_cache_bytes = 1 * kMiB;
  Pool p = MakePool(o, TestBackend::FakeCuda());
  std::mutex mu;
  std::condition_variable cv;
  bool held = false, emptied = false;
  std::thread t([&] {
    ASSERT_TRUE(p.pool->Free(*p.pool->Allocate((kMiB / 2))).ok());
    ASSERT_TRUE(p.pool->Free(*p.pool->Allocate(1 * kMiB)).ok());  // Held over budget.
    std::unique_lock<std::mutex> lock(mu);
    held = true;
    cv.notify_all();
    cv.wait(lock, [&] { return emptied; });
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return held; });
  }
  ASSERT_TRUE(p.pool->EmptyCache().ok());
  EXPECT_EQ(p.state->live_segments(), 0);
  EXPECT_EQ(p.pool->Stats().all.reserved_bytes.current, 0);
  EXPECT_EQ(CheckPoolInvariants(*p.pool), "");
  {
    std::lock_guard<std::mutex> lock(mu);
    emptied = true;
  }
  cv.notify_all();
  t.join();
}

TEST(TestBackendTest, ChecksFreeSegmentArguments) {
  TestBackend backend;
  void* a = *backend.AllocateSegment(8192);
  backend.FreeSegment(a, 4096);
  int x;
  backend.FreeSegment(&x, 4096);
  EXPECT_EQ(backend.state()->violations().size(), 2u);
  EXPECT_EQ(backend.state()->live_bytes(), 8192u);
  backend.FreeSegment(a, 8192);
  EXPECT_EQ(backend.state()->live_segments(), 0);
  backend.set_capacity(4096);
  EXPECT_EQ(backend.AllocateSegment(8192).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(FakeStreamEventsTest, CompletesOnRequest) {
  FakeStreamEvents events;
  EventId a = *events.Record(1);
  EventId b = *events.Record(2);
  EXPECT_FALSE(*events.Query(a));
  events.Complete(1);
  EXPECT_TRUE(*events.Query(a));
  EXPECT_FALSE(*events.Query(b));
  ASSERT_TRUE(events.Synchronize(b).ok());
  EXPECT_TRUE(*events.Query(b));
  events.Release(a);
  events.Release(b);
  events.Release(b);
  EXPECT_EQ(events.violations().size(), 1u);
  EXPECT_EQ(events.outstanding(), 0);
  EXPECT_EQ(events.records(), 2);
}

TEST(MemoryStatsTest, DerivedFigures) {
  MemoryStats st;
  EXPECT_EQ(st.cache_hit_rate(), 0.0);
  EXPECT_EQ(st.fragmentation_ratio(), 0.0);
  st.num_cache_hits = 3;
  st.num_cache_misses = 1;
  st.all.cached_bytes.current = 1000;
  st.largest_free_block = 250;
  EXPECT_DOUBLE_EQ(st.cache_hit_rate(), 0.75);
  EXPECT_DOUBLE_EQ(st.fragmentation_ratio(), 0.75);
  EXPECT_EQ(FormatByteSize(512), "512 B");
  EXPECT_EQ(FormatByteSize(3 * 1024 * 1024), "3.0 MiB");
  EXPECT_EQ(st.ToMap().size(), 3u * 6 * 4 + 12);
}

}  // namespace
}  // namespace genesis::memory
