#include "genesis/memory/allocator_suite.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "genesis/core/byte_size.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/memory_stats.h"
#include "genesis/memory/observer.h"

namespace genesis::memory {

std::string BackendFactoryName(const ::testing::TestParamInfo<BackendFactory>& info) {
  return info.param.name;
}

std::unique_ptr<CachingAllocator> AllocatorSuite::MakePool(AllocatorOptions options) {
  auto pool = CachingAllocator::Create(GetParam().make(), std::move(options));
  EXPECT_TRUE(pool.ok()) << pool.status();
  return pool.ok() ? *std::move(pool) : nullptr;
}

namespace {

std::string CheckStat(const char* name, const PoolMemoryStats& p) {
  auto cur_ok = [](const MemoryStat& s) {
    return s.current == s.allocated - s.freed && s.peak >= s.current && s.current >= 0;
  };
  if (p.reserved_bytes.current != p.allocated_bytes.current + p.cached_bytes.current) {
    return absl::StrCat(name, ": reserved ", p.reserved_bytes.current, " != allocated ",
                        p.allocated_bytes.current, " + cached ", p.cached_bytes.current);
  }
  if (p.active_bytes.current < p.allocated_bytes.current) {
    return absl::StrCat(name, ": active ", p.active_bytes.current, " < allocated ",
                        p.allocated_bytes.current);
  }
  if (p.inactive_split_bytes.current > p.cached_bytes.current) {
    return absl::StrCat(name, ": inactive_split ", p.inactive_split_bytes.current,
                        " > cached ", p.cached_bytes.current);
  }
  if (p.requested_bytes.current > p.allocated_bytes.current) {
    return absl::StrCat(name, ": requested ", p.requested_bytes.current, " > allocated ",
                        p.allocated_bytes.current);
  }
  for (const MemoryStat* s :
       {&p.allocated_bytes, &p.cached_bytes, &p.reserved_bytes, &p.active_bytes,
        &p.inactive_split_bytes, &p.requested_bytes}) {
    if (!cur_ok(*s)) {
      return absl::StrCat(name, ": a gauge has current ", s->current, ", peak ", s->peak,
                          ", allocated ", s->allocated, ", freed ", s->freed);
    }
  }
  return "";
}

}  // namespace

std::string CheckPoolInvariants(const CachingAllocator& pool) {
  const MemoryStats st = pool.Stats();
  for (auto [name, p] : {std::pair{"all", &st.all}, std::pair{"small", &st.small_pool},
                         std::pair{"large", &st.large_pool}}) {
    if (std::string e = CheckStat(name, *p); !e.empty()) return e;
  }
  if (st.all.allocated_bytes.current !=
          st.small_pool.allocated_bytes.current + st.large_pool.allocated_bytes.current ||
      st.all.reserved_bytes.current !=
          st.small_pool.reserved_bytes.current + st.large_pool.reserved_bytes.current) {
    return "small + large != all";
  }
  int64_t reserved = 0, allocated = 0, active = 0, inactive_split = 0, requested = 0;
  uintptr_t last_end = 0;
  const auto segments = pool.Snapshot();
  for (const auto& s : segments) {
    const auto start = reinterpret_cast<uintptr_t>(s.address);
    if (start < last_end) return absl::StrFormat("segment %p overlaps another", s.address);
    last_end = start + s.size;
    uintptr_t at = start;
    int64_t unmapped = 0;
    for (const auto& b : s.blocks) {
      if (reinterpret_cast<uintptr_t>(b.address) != at) {
        return absl::StrFormat("segment %p: block %p does not follow its neighbour",
                               s.address, b.address);
      }
      at += b.size;
      if (b.state == CachingAllocator::BlockState::kAllocated) {
        allocated += b.size;
        active += b.size;
        requested += b.requested;
      } else if (b.state == CachingAllocator::BlockState::kPendingFree) {
        active += b.size;
      } else if (b.state == CachingAllocator::BlockState::kUnmapped) {
        if (!s.expandable) return absl::StrFormat("segment %p: unmapped block", s.address);
        unmapped += static_cast<int64_t>(b.size);
      } else if (s.blocks.size() > 1 || s.expandable) {
        inactive_split += b.size;
      }
    }
    if (static_cast<int64_t>(s.mapped_bytes) != static_cast<int64_t>(s.size) - unmapped) {
      return absl::StrFormat("segment %p: mapped_bytes %d, but %d of %d bytes are unmapped",
                             s.address, s.mapped_bytes, unmapped, s.size);
    }
    reserved += static_cast<int64_t>(s.mapped_bytes);
    if (at != start + s.size) {
      return absl::StrFormat("segment %p: blocks cover %d of %d bytes", s.address,
                             at - start, s.size);
    }
  }
  if (reserved != st.all.reserved_bytes.current ||
      allocated != st.all.allocated_bytes.current ||
      active != st.all.active_bytes.current ||
      inactive_split != st.all.inactive_split_bytes.current ||
      requested != st.all.requested_bytes.current ||
      static_cast<int64_t>(segments.size()) != st.num_segments) {
    return absl::StrCat("snapshot disagrees with stats: reserved ", reserved, " vs ",
                        st.all.reserved_bytes.current, ", allocated ", allocated, " vs ",
                        st.all.allocated_bytes.current, ", active ", active, " vs ",
                        st.all.active_bytes.current, ", inactive_split ", inactive_split,
                        " vs ", st.all.inactive_split_bytes.current, ", requested ",
                        requested, " vs ", st.all.requested_bytes.current,
                        ", segments ", segments.size(), " vs ", st.num_segments);
  }
  return "";
}

// Test binaries that link the suite only for CheckPoolInvariants do not instantiate it.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(AllocatorSuite);

namespace {

using ::testing::HasSubstr;

AllocatorOptions NoThreadCache() {
  AllocatorOptions o;
  o.thread_cache_blocks = 0;
  return o;
}

TEST_P(AllocatorSuite, BlocksAreAlignedTo512) {
  auto pool = MakePool();
  ASSERT_NE(pool, nullptr);
  std::vector<void*> ptrs;
  for (size_t size : {size_t{1}, size_t{7}, size_t{512}, size_t{513}, size_t{4000},
                      size_t{1} << 20, (size_t{3} << 20) + 1, size_t{25} << 20}) {
    auto p = pool->Allocate(size);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(*p) % 512, 0u) << size;
    EXPECT_GE(pool->AllocationSize(*p), size);
    EXPECT_EQ(pool->AllocationSize(*p) % 512, 0u);
    ptrs.push_back(*p);
  }
  for (void* p : ptrs) EXPECT_TRUE(pool->Free(p).ok());
}

TEST_P(AllocatorSuite, LiveBlocksNeverOverlap) {
  auto pool = MakePool();
  ASSERT_NE(pool, nullptr);
  std::map<uintptr_t, size_t> live;
  uint64_t x = 12345;
  auto next = [&x] { return x = x * 6364136223846793005ull + 1442695040888963407ull; };
  for (int i = 0; i < 2000; ++i) {
    if (live.size() > 50 || (next() >> 33) % 3 == 0) {
      if (live.empty()) continue;
      auto it = live.begin();
      std::advance(it, (next() >> 33) % live.size());
      ASSERT_TRUE(pool->Free(reinterpret_cast<void*>(it->first)).ok());
      live.erase(it);
      continue;
    }
    const size_t size = size_t{1} << ((next() >> 33) % 24);
    auto p = pool->Allocate(size + (next() >> 50));
    ASSERT_TRUE(p.ok()) << p.status();
    const auto a = reinterpret_cast<uintptr_t>(*p);
    const size_t block = pool->AllocationSize(*p);
    auto after = live.lower_bound(a);
    if (after != live.end()) {
      ASSERT_LE(a + block, after->first) << "overlaps next";
    }
    if (after != live.begin()) {
      auto before = std::prev(after);
      ASSERT_LE(before->first + before->second, a) << "overlaps previous";
    }
    live[a] = block;
  }
  ASSERT_EQ(CheckPoolInvariants(*pool), "");
  for (auto& [a, s] : live) ASSERT_TRUE(pool->Free(reinterpret_cast<void*>(a)).ok());
  EXPECT_EQ(CheckPoolInvariants(*pool), "");
  EXPECT_EQ(pool->Stats().all.allocated_bytes.current, 0);
}

TEST_P(AllocatorSuite, SplitsAndMergesSmallBlocks) {
  auto pool = MakePool(NoThreadCache());
  ASSERT_NE(pool, nullptr);
  void* a = *pool->Allocate(1000);
  void* b = *pool->Allocate(2048);
  void* c = *pool->Allocate(512);
  auto snap = pool->Snapshot();
  ASSERT_EQ(snap.size(), 1u);
  ASSERT_EQ(snap[0].size, 2 * kMiB);
  ASSERT_EQ(snap[0].blocks.size(), 4u);
  EXPECT_EQ(snap[0].blocks[0].address, a);
  EXPECT_EQ(snap[0].blocks[0].size, 1024u);
  EXPECT_EQ(snap[0].blocks[0].requested, 1000u);
  EXPECT_EQ(snap[0].blocks[1].address, b);
  EXPECT_EQ(snap[0].blocks[2].address, c);
  EXPECT_EQ(snap[0].blocks[3].state, CachingAllocator::BlockState::kFree);
  EXPECT_EQ(snap[0].blocks[3].size, 2 * kMiB - 1024 - 2048 - 512);
  ASSERT_TRUE(pool->Free(b).ok());
  snap = pool->Snapshot();
  ASSERT_EQ(snap[0].blocks.size(), 4u);
  EXPECT_EQ(snap[0].blocks[1].state, CachingAllocator::BlockState::kFree);
  ASSERT_TRUE(pool->Free(a).ok());  // Merges with b.
  snap = pool->Snapshot();
  ASSERT_EQ(snap[0].blocks.size(), 3u);
  EXPECT_EQ(snap[0].blocks[0].size, 1024u + 2048u);
  EXPECT_EQ(CheckPoolInvariants(*pool), "");
  // A request that fits the hole reuses it (best fit, lowest address).
  void* d = *pool->Allocate(3000);
  EXPECT_EQ(d, a);
  ASSERT_TRUE(pool->Free(d).ok());
  ASSERT_TRUE(pool->Free(c).ok());  // Merges everything back into one block.
  snap = pool->Snapshot();
  ASSERT_EQ(snap[0].blocks.size(), 1u);
  EXPECT_EQ(snap[0].blocks[0].size, 2 * kMiB);
  EXPECT_EQ(pool->Stats().all.inactive_split_bytes.current, 0);
  EXPECT_EQ(CheckPoolInvariants(*pool), "");
}

TEST_P(AllocatorSuite, LargeBlocksSplitOnlyWithLargeRemainder) {
  auto pool = MakePool(NoThreadCache());
  ASSERT_NE(pool, nullptr);
  if (pool->expandable_segments()) {
    GTEST_SKIP() << "classic segments only (expandable_segments_test covers the other)";
  }
  // 20 MiB segment: 4 MiB taken leaves 16 MiB (> 1 MiB): split.
  void* a = *pool->Allocate(4 * kMiB);
  auto snap = pool->Snapshot();
  ASSERT_EQ(snap.size(), 1u);
  EXPECT_EQ(snap[0].size, 20 * kMiB);
  EXPECT_EQ(snap[0].pool, CachingAllocator::PoolKind::kLarge);
  ASSERT_EQ(snap[0].blocks.size(), 2u);
  // 15.5 MiB leaves 0.5 MiB: not split, the block keeps the whole remainder.
  void* b = *pool->Allocate(15 * kMiB + kMiB / 2);
  EXPECT_EQ(pool->AllocationSize(b), 16 * kMiB);
  // Above large_segment_threshold: own segment, rounded to 2 MiB.
  void* c = *pool->Allocate(11 * kMiB + 1);
  snap = pool->Snapshot();
  ASSERT_EQ(snap.size(), 2u);
  EXPECT_EQ(pool->Stats().all.reserved_bytes.current,
            static_cast<int64_t>(20 * kMiB + 12 * kMiB));
  for (void* p : {a, b, c}) ASSERT_TRUE(pool->Free(p).ok());
  EXPECT_EQ(CheckPoolInvariants(*pool), "");
}

TEST_P(AllocatorSuite, StatsIdentitiesHoldAtEveryStep) {
  auto pool = MakePool();
  ASSERT_NE(pool, nullptr);
  std::vector<void*> ptrs;
  for (size_t size : {size_t{100}, size_t{5000}, 2 * kMiB, 12 * kMiB, size_t{700000}}) {
    ptrs.push_back(*pool->Allocate(size));
    ASSERT_EQ(CheckPoolInvariants(*pool), "") << size;
  }
  MemoryStats st = pool->Stats();
  EXPECT_EQ(st.num_allocations, 5);
  EXPECT_EQ(st.all.requested_bytes.current, 100 + 5000 + 2 * kMiB + 12 * kMiB + 700000);
  for (void* p : ptrs) {
    ASSERT_TRUE(pool->Free(p).ok());
    ASSERT_EQ(CheckPoolInvariants(*pool), "");
  }
  st = pool->Stats();
  EXPECT_EQ(st.num_frees, 5);
  EXPECT_EQ(st.all.allocated_bytes.current, 0);
  EXPECT_EQ(st.all.active_bytes.current, 0);
  EXPECT_EQ(st.all.requested_bytes.current, 0);
  EXPECT_EQ(st.all.cached_bytes.current, st.all.reserved_bytes.current);
  EXPECT_GT(st.all.reserved_bytes.current, 0);
  const auto map = st.ToMap();
  EXPECT_EQ(map.at("allocated_bytes.all.current"), 0);
  EXPECT_EQ(map.at("reserved_bytes.all.current"), st.all.reserved_bytes.current);
  EXPECT_EQ(map.at("num_frees"), 5);
}

TEST_P(AllocatorSuite, PeaksAndResets) {
  auto pool = MakePool();
  ASSERT_NE(pool, nullptr);
  void* a = *pool->Allocate(3 * kMiB);
  void* b = *pool->Allocate(3 * kMiB);
  ASSERT_TRUE(pool->Free(a).ok());
  MemoryStats st = pool->Stats();
  EXPECT_EQ(st.all.allocated_bytes.peak, static_cast<int64_t>(6 * kMiB));
  EXPECT_EQ(st.all.allocated_bytes.current, static_cast<int64_t>(3 * kMiB));
  pool->ResetPeakStats();
  st = pool->Stats();
  EXPECT_EQ(st.all.allocated_bytes.peak, static_cast<int64_t>(3 * kMiB));
  pool->ResetAccumulatedStats();
  st = pool->Stats();
  EXPECT_EQ(st.num_allocations, 0);
  EXPECT_EQ(st.all.allocated_bytes.allocated, 0);
  EXPECT_EQ(st.all.allocated_bytes.current, static_cast<int64_t>(3 * kMiB));
  ASSERT_TRUE(pool->Free(b).ok());
  EXPECT_EQ(pool->Stats().num_frees, 1);
}

// Thread-cache hits change no shared figure, yet peaks stay exact on one thread, also
// when cached and uncached allocations interleave.
TEST_P(AllocatorSuite, PeaksAreExactOnOneThread) {
  auto pool = MakePool();
  ASSERT_NE(pool, nullptr);
  std::mt19937_64 rng(7);
  struct Live {
    void* ptr;
    int64_t size;
    int64_t requested;
    bool small;
  };
  std::vector<Live> live;
  // [0]: all, [1]: small pool, [2]: large pool.
  int64_t allocated[3] = {}, requested[3] = {}, allocated_peak[3] = {}, requested_peak[3] = {};
  for (int step = 0; step < 3000; ++step) {
    // The change of allocated and requested bytes, and its pool.
    int64_t size = 0;
    int64_t asked = 0;
    bool small = false;
    if (live.empty() || (live.size() < 40 && rng() % 2 == 0)) {
      // Mostly a few recurring small sizes (thread-cache hits), sometimes large ones.
      const size_t bytes = rng() % 8 == 0 ? (1 + rng() % 6) * kMiB + rng() % 4096
                                          : size_t{512} << (rng() % 8);
      void* p = *pool->Allocate(bytes);
      size = static_cast<int64_t>(pool->AllocationSize(p));
      asked = static_cast<int64_t>(bytes);
      small = size < static_cast<int64_t>(kMiB);
      live.push_back({p, size, asked, small});
    } else {
      const auto i = static_cast<ptrdiff_t>(rng() % live.size());
      const Live freed = live[static_cast<size_t>(i)];
      live.erase(live.begin() + i);
      ASSERT_TRUE(pool->Free(freed.ptr).ok());
      size = -freed.size;
      asked = -freed.requested;
      small = freed.small;
    }
    for (int p : {0, small ? 1 : 2}) {
      allocated[p] += size;
      requested[p] += asked;
      allocated_peak[p] = std::max(allocated_peak[p], allocated[p]);
      requested_peak[p] = std::max(requested_peak[p], requested[p]);
    }
    const MemoryStats st = pool->Stats();
    const PoolMemoryStats* pools[3] = {&st.all, &st.small_pool, &st.large_pool};
    for (int p = 0; p < 3; ++p) {
      ASSERT_EQ(pools[p]->allocated_bytes.current, allocated[p]) << step << " pool " << p;
      ASSERT_EQ(pools[p]->allocated_bytes.peak, allocated_peak[p]) << step << " pool " << p;
      ASSERT_EQ(pools[p]->active_bytes.peak, allocated_peak[p]) << step << " pool " << p;
      ASSERT_EQ(pools[p]->requested_bytes.peak, requested_peak[p]) << step << " pool " << p;
    }
  }
  for (const Live& l : live) ASSERT_TRUE(pool->Free(l.ptr).ok());
  EXPECT_EQ(CheckPoolInvariants(*pool), "");
}

TEST_P(AllocatorSuite, EmptyCacheReturnsFreeSegments) {
  // Expandable segments map just what each request needs, so the chunks add up below.
  AllocatorOptions exact;
  exact.expandable_min_map = 0;
  auto pool = MakePool(exact);
  ASSERT_NE(pool, nullptr);
  void* small = *pool->Allocate(4096);
  void* large = *pool->Allocate(30 * kMiB);
  void* kept = *pool->Allocate(5 * kMiB);
  ASSERT_TRUE(pool->Free(small).ok());
  ASSERT_TRUE(pool->Free(large).ok());
  const bool expandable = pool->expandable_segments();
  // Classic: a small segment and two large ones. Expandable: the small segment and the
  // stream's address range.
  ASSERT_EQ(pool->Stats().num_segments, expandable ? 2 : 3);
  ASSERT_TRUE(pool->EmptyCache().ok());
  MemoryStats st = pool->Stats();
  EXPECT_EQ(st.num_segments, 1);  // Only the segment holding `kept`.
  EXPECT_EQ(st.num_segment_frees, expandable ? 1 : 2);
  if (expandable) {
    // Only the chunks under `kept` stay mapped (chunks are at most 2 MiB).
    EXPECT_GE(st.all.reserved_bytes.current, static_cast<int64_t>(5 * kMiB));
    EXPECT_LE(st.all.reserved_bytes.current, static_cast<int64_t>(8 * kMiB));
    EXPECT_GE(st.num_unmaps, 1);
  } else {
    EXPECT_EQ(st.all.reserved_bytes.current, static_cast<int64_t>(20 * kMiB));
  }
  EXPECT_EQ(CheckPoolInvariants(*pool), "");
  ASSERT_TRUE(pool->Free(kept).ok());
  ASSERT_TRUE(pool->Compact().ok());
  st = pool->Stats();
  EXPECT_EQ(st.num_segments, 0);
  EXPECT_EQ(st.all.reserved_bytes.current, 0);
  // Classic: 2 MiB small, a 30 MiB segment and a 20 MiB one. Expandable: 30 MiB and
  // 5 MiB mapped, rounded up to chunks.
  EXPECT_GE(st.all.reserved_bytes.peak,
            static_cast<int64_t>(2 * kMiB + (expandable ? 35 * kMiB : 50 * kMiB)));
  EXPECT_LE(st.all.reserved_bytes.peak,
            static_cast<int64_t>(2 * kMiB + (expandable ? 36 * kMiB : 50 * kMiB)));
}

TEST_P(AllocatorSuite, ReusesCachedBlocks) {
  auto pool = MakePool();
  ASSERT_NE(pool, nullptr);
  for (size_t size : {size_t{4096}, 8 * kMiB, 40 * kMiB}) {
    void* a = *pool->Allocate(size);
    ASSERT_TRUE(pool->Free(a).ok());
    void* b = *pool->Allocate(size);
    EXPECT_EQ(a, b) << size;
    ASSERT_TRUE(pool->Free(b).ok());
  }
  const MemoryStats st = pool->Stats();
  EXPECT_EQ(st.num_cache_misses, 3);
  EXPECT_EQ(st.num_cache_hits, 3);
  EXPECT_DOUBLE_EQ(st.cache_hit_rate(), 0.5);
}

TEST_P(AllocatorSuite, ZeroBytesGivesUniqueBlocks) {
  auto pool = MakePool();
  ASSERT_NE(pool, nullptr);
  void* a = *pool->Allocate(0);
  void* b = *pool->Allocate(0);
  EXPECT_NE(a, nullptr);
  EXPECT_NE(a, b);
  EXPECT_EQ(pool->AllocationSize(a), 512u);
  EXPECT_TRUE(pool->Free(a).ok());
  EXPECT_TRUE(pool->Free(b).ok());
  EXPECT_TRUE(pool->Free(nullptr).ok());
}

TEST_P(AllocatorSuite, ImpossibleSizesAreInvalid) {
  auto pool = MakePool();
  ASSERT_NE(pool, nullptr);
  const size_t huge = std::numeric_limits<size_t>::max() - 10;
  auto p = pool->Allocate(huge);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(p.status().message()), HasSubstr(absl::StrCat(huge)));
  EXPECT_EQ(CheckPoolInvariants(*pool), "");
}

TEST_P(AllocatorSuite, RejectsBadFreesNamingThePointer) {
  auto pool = MakePool(NoThreadCache());
  ASSERT_NE(pool, nullptr);
  void* a = *pool->Allocate(4096);
  void* b = *pool->Allocate(4096);
  char* interior = static_cast<char*>(b) + 512;
  absl::Status s = pool->Free(interior);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr(absl::StrFormat("%p", interior)));
  EXPECT_THAT(std::string(s.message()), HasSubstr("interior"));
  int local = 0;
  s = pool->Free(&local);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr(absl::StrFormat("%p", &local)));
  EXPECT_THAT(std::string(s.message()), HasSubstr("not allocated by this pool"));
  ASSERT_TRUE(pool->Free(b).ok());
  s = pool->Free(b);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr(absl::StrFormat("%p", b)));
  EXPECT_THAT(std::string(s.message()), HasSubstr("double free"));
  EXPECT_FALSE(pool->Owns(b));
  EXPECT_TRUE(pool->Owns(a));
  EXPECT_FALSE(pool->RecordStream(b, 7).ok());
  ASSERT_TRUE(pool->Free(a).ok());
  EXPECT_EQ(CheckPoolInvariants(*pool), "");
}

TEST_P(AllocatorSuite, DoubleFreeCaughtWithThreadCache) {
  auto pool = MakePool();
  ASSERT_NE(pool, nullptr);
  void* a = *pool->Allocate(4096);
  ASSERT_TRUE(pool->Free(a).ok());
  absl::Status s = pool->Free(a);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("double free"));
  EXPECT_EQ(CheckPoolInvariants(*pool), "");
  // Taken from the thread cache and freed into it: the block this thread freed last,
  // held for its next request of the size, is still caught, and so is a recorded stream.
  for (int round = 0; round < 3; ++round) {
    void* b = *pool->Allocate(4096);
    ASSERT_TRUE(pool->Free(b).ok());
    s = pool->Free(b);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << "round " << round;
    EXPECT_THAT(std::string(s.message()), HasSubstr("double free"));
    EXPECT_FALSE(pool->RecordStream(b, 7).ok());
    EXPECT_EQ(CheckPoolInvariants(*pool), "");
  }
  MemoryStats st = pool->Stats();
  EXPECT_EQ(st.all.allocated_bytes.current, 0);
  EXPECT_EQ(st.all.requested_bytes.current, 0);
}

// The block this thread freed last, handed out again and then freed on another thread:
// the owner's thread cache must see that the allocation ended, so that its own free of
// the pointer is a double free and not a second copy of the block in a cache.
TEST_P(AllocatorSuite, HotBlockFreedOnAnotherThreadIsNotFreedTwice) {
  auto pool = MakePool();
  ASSERT_NE(pool, nullptr);
  void* a = *pool->Allocate(4096);
  ASSERT_TRUE(pool->Free(a).ok());
  void* b = *pool->Allocate(4096);
  std::thread([&] { ASSERT_TRUE(pool->Free(b).ok()); }).join();
  absl::Status s = pool->Free(b);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("double free"));
  EXPECT_EQ(CheckPoolInvariants(*pool), "");
  // Live blocks stay distinct afterwards.
  void* c = *pool->Allocate(4096);
  void* d = *pool->Allocate(4096);
  EXPECT_NE(c, d);
  for (void* p : {c, d}) ASSERT_TRUE(pool->Free(p).ok());
  EXPECT_EQ(pool->Stats().all.allocated_bytes.current, 0);
  EXPECT_EQ(CheckPoolInvariants(*pool), "");
}

TEST_P(AllocatorSuite, WarmUpReservesSegments) {
  AllocatorOptions o;
  o.warm_up_sizes = {4096, 30 * kMiB};
  auto pool = MakePool(o);
  ASSERT_NE(pool, nullptr);
  MemoryStats st = pool->Stats();
  EXPECT_EQ(st.num_segments, 2);
  EXPECT_EQ(st.all.allocated_bytes.current, 0);
  void* p = *pool->Allocate(30 * kMiB);
  EXPECT_EQ(pool->Stats().num_cache_hits, 1);
  ASSERT_TRUE(pool->Free(p).ok());
}

class RecordingObserver : public AllocatorObserver {
 public:
  void OnEvent(const AllocatorEvent& e) override {
    std::lock_guard<std::mutex> lock(mu);
    events.push_back(e);
  }
  std::mutex mu;
  std::vector<AllocatorEvent> events;
};

TEST_P(AllocatorSuite, ObserversSeeEvents) {
  auto pool = MakePool();
  ASSERT_NE(pool, nullptr);
  auto observer = std::make_shared<RecordingObserver>();
  pool->AddObserver(observer);
  void* a = *pool->Allocate(100, 0);
  ASSERT_TRUE(pool->Free(a).ok());
  void* b = *pool->Allocate(100, 0);
  ASSERT_TRUE(pool->Free(b).ok());
  ASSERT_TRUE(pool->Compact().ok());
  pool->RemoveObserver(observer.get());
  void* c = *pool->Allocate(100);
  ASSERT_TRUE(pool->Free(c).ok());
  std::vector<AllocatorEventType> types;
  for (const auto& e : observer->events) types.push_back(e.type);
  using T = AllocatorEventType;
  EXPECT_THAT(types, ::testing::ElementsAre(T::kSegmentAlloc, T::kAllocate, T::kFree,
                                            T::kAllocate, T::kFree, T::kSegmentFree));
  ASSERT_EQ(observer->events.size(), 6u);
  EXPECT_FALSE(observer->events[1].cache_hit);
  EXPECT_TRUE(observer->events[3].cache_hit);
  EXPECT_EQ(observer->events[1].requested, 100u);
  EXPECT_EQ(observer->events[1].size, 512u);
  EXPECT_EQ(observer->events[1].address, a);
  EXPECT_GT(observer->events[1].timestamp_ns, 0);
  EXPECT_LE(observer->events[1].timestamp_ns, observer->events[2].timestamp_ns);
  EXPECT_EQ(AllocatorEventTypeName(T::kSegmentFree), "segment_free");
  // Fast-path events (when the pool has thread caches) reach OnEvent stamped too.
  for (const auto& e : observer->events) EXPECT_GT(e.timestamp_ns, 0);
  EXPECT_EQ(AllocatorEventTypeName(T::kSegmentMap), "segment_map");
}

TEST_P(AllocatorSuite, SummaryIsReadable) {
  auto pool = MakePool();
  ASSERT_NE(pool, nullptr);
  void* a = *pool->Allocate(3 * kMiB);
  const std::string summary = pool->Summary();
  EXPECT_THAT(summary, HasSubstr("Allocated memory"));
  EXPECT_THAT(summary, HasSubstr("Reserved memory"));
  EXPECT_THAT(summary, HasSubstr("Non-releasable (inactive split)"));
  EXPECT_THAT(summary, HasSubstr("Requested memory"));
  EXPECT_THAT(summary, HasSubstr("3.0 MiB"));
  EXPECT_THAT(summary, HasSubstr(FormatByteSize(static_cast<uint64_t>(
                           pool->Stats().all.reserved_bytes.current))));
  ASSERT_TRUE(pool->Free(a).ok());
}

TEST_P(AllocatorSuite, ThreadsShareAPoolSafely) {
  auto pool = MakePool();
  ASSERT_NE(pool, nullptr);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&pool, t] {
      std::vector<void*> mine;
      for (int i = 0; i < 3000; ++i) {
        const size_t size = (i * 7919 + t * 104729) % (i % 10 == 0 ? 24 * kMiB : 65536) + 1;
        auto p = pool->Allocate(size);
        ASSERT_TRUE(p.ok()) << p.status();
        mine.push_back(*p);
        if (mine.size() > 16 || i % 3 == 0) {
          ASSERT_TRUE(pool->Free(mine.front()).ok());
          mine.erase(mine.begin());
        }
        if (i % 1000 == 999) {
          ASSERT_TRUE(pool->EmptyCache().ok());
        }
      }
      for (void* p : mine) ASSERT_TRUE(pool->Free(p).ok());
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(CheckPoolInvariants(*pool), "");
  EXPECT_EQ(pool->Stats().all.allocated_bytes.current, 0);
  ASSERT_TRUE(pool->Compact().ok());
  EXPECT_EQ(pool->Stats().all.reserved_bytes.current, 0);
}

}  // namespace
}  // namespace genesis::memory
