// Randomized multi-threaded operation sequences against one pool: 4 threads, 10^6
// operations in all (allocate, free, record_stream, empty_cache, event completion) over
// sizes from 1 B to 256 MiB. Each block carries its owner's tag at both ends, so an
// overlap between live blocks shows up as a clobbered tag; the pool's structural and
// stats invariants are checked while threads run and at the end, when nothing may be
// left. TestBackend maps memory without reserving it, so large sizes cost nothing.
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "genesis/memory/allocator_suite.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/fake_stream_events.h"
#include "genesis/memory/test_backend.h"

namespace genesis::memory {
namespace {

constexpr int kThreads = 4;
constexpr int kOpsPerThread = 250'000;

struct Live {
  char* ptr;
  size_t size;
  uint64_t tag;
};

uint64_t Next(uint64_t& x) {
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return x;
}

size_t RandomSize(uint64_t& rng) {
  const uint64_t r = Next(rng);
  const int bucket = static_cast<int>(r % 100);
  int max_log;
  if (bucket < 75) {
    max_log = 16;  // Up to 64 KiB: the thread-cache fast path.
  } else if (bucket < 95) {
    max_log = 24;  // Up to 16 MiB.
  } else {
    max_log = 28;  // Up to 256 MiB.
  }
  const int log = static_cast<int>((r >> 8) % (max_log + 1));
  const size_t base = size_t{1} << log;
  return base + (r >> 40) % base;  // In [2^log, 2^(log+1)), capped below.
}

void WriteTag(const Live& l) {
  std::memcpy(l.ptr, &l.tag, sizeof(l.tag));
  std::memcpy(l.ptr + l.size - sizeof(l.tag), &l.tag, sizeof(l.tag));
}

bool TagIntact(const Live& l) {
  uint64_t head, tail;
  std::memcpy(&head, l.ptr, sizeof(head));
  std::memcpy(&tail, l.ptr + l.size - sizeof(tail), sizeof(tail));
  return head == l.tag && tail == l.tag;
}

TEST(CachingAllocatorStressTest, RandomOperationsOnFourThreads) {
  auto backend = TestBackend::FakeCuda();
  auto state = backend->state();
  auto events_owned = std::make_unique<FakeStreamEvents>();
  FakeStreamEvents* events = events_owned.get();
  AllocatorOptions options;
  options.cache_limit = 2048 * kMiB;
  auto created = CachingAllocator::Create(std::move(backend), options,
                                          std::move(events_owned));
  ASSERT_TRUE(created.ok()) << created.status();
  CachingAllocator& pool = **created;

  std::atomic<int> failures{0};
  std::atomic<uint64_t> tag_source{1};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      uint64_t rng = 0x9E3779B97F4A7C15ull * (t + 1);
      const StreamId my_stream = static_cast<StreamId>(t + 1);
      std::vector<Live> live;
      size_t live_bytes = 0;
      for (int i = 0; i < kOpsPerThread && failures.load() == 0; ++i) {
        const int op = static_cast<int>(Next(rng) % 1000);
        if (op < 480 && live.size() < 64 && live_bytes < (1u << 30)) {
          size_t size = RandomSize(rng);
          if (size > (size_t{256} << 20)) size = size_t{256} << 20;
          auto p = pool.Allocate(size, my_stream);
          if (!p.ok()) {
            ADD_FAILURE() << p.status();
            failures.fetch_add(1);
            break;
          }
          if (reinterpret_cast<uintptr_t>(*p) % 512 != 0) {
            ADD_FAILURE() << "misaligned " << *p;
            failures.fetch_add(1);
          }
          Live l{static_cast<char*>(*p), size < 16 ? 16 : size, tag_source.fetch_add(1)};
          if (pool.AllocationSize(l.ptr) < l.size) {
            ADD_FAILURE() << "block smaller than its request";
            failures.fetch_add(1);
          }
          WriteTag(l);
          live.push_back(l);
          live_bytes += l.size;
        } else if (op < 900 && !live.empty()) {
          const size_t k = Next(rng) % live.size();
          const Live l = live[k];
          live[k] = live.back();
          live.pop_back();
          live_bytes -= l.size;
          if (!TagIntact(l)) {
            ADD_FAILURE() << "block " << static_cast<void*>(l.ptr) << " was overwritten";
            failures.fetch_add(1);
          }
          absl::Status s = pool.Free(l.ptr);
          if (!s.ok()) {
            ADD_FAILURE() << s;
            failures.fetch_add(1);
          }
        } else if (op < 980 && !live.empty()) {
          const Live& l = live[Next(rng) % live.size()];
          const StreamId other = static_cast<StreamId>(Next(rng) % (kThreads + 1) + 1);
          absl::Status s = pool.RecordStream(l.ptr, other);
          if (!s.ok()) {
            ADD_FAILURE() << s;
            failures.fetch_add(1);
          }
        } else if (op < 998) {
          events->Complete(static_cast<StreamId>(Next(rng) % (kThreads + 1) + 1));
        } else if (op < 999) {
          absl::Status s = pool.EmptyCache();
          if (!s.ok()) {
            ADD_FAILURE() << s;
            failures.fetch_add(1);
          }
        } else if (t == 0 && i % 16 == 0) {
          // Structural invariants under the pool lock while others run.
          for (const auto& seg : pool.Snapshot()) {
            size_t sum = 0;
            for (const auto& b : seg.blocks) sum += b.size;
            if (sum != seg.size) {
              ADD_FAILURE() << "segment " << seg.address << " blocks sum to " << sum;
              failures.fetch_add(1);
            }
          }
        }
      }
      for (const Live& l : live) {
        if (!TagIntact(l)) {
          ADD_FAILURE() << "block " << static_cast<void*>(l.ptr) << " was overwritten";
          failures.fetch_add(1);
        }
        if (!pool.Free(l.ptr).ok()) failures.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_EQ(failures.load(), 0);

  EXPECT_EQ(CheckPoolInvariants(pool), "");
  MemoryStats st = pool.Stats();
  EXPECT_EQ(st.all.allocated_bytes.current, 0);
  EXPECT_EQ(st.all.requested_bytes.current, 0);
  EXPECT_EQ(st.num_allocations, st.num_frees);
  EXPECT_GT(st.num_allocations, 100'000);
  EXPECT_GT(st.num_cache_hits, st.num_cache_misses);
  EXPECT_EQ(st.num_ooms, 0);
  ASSERT_TRUE(pool.Compact().ok());
  st = pool.Stats();
  EXPECT_EQ(st.all.reserved_bytes.current, 0);
  EXPECT_EQ(st.all.active_bytes.current, 0);
  EXPECT_EQ(st.all.inactive_split_bytes.current, 0);
  EXPECT_EQ(st.num_segments, 0);
  EXPECT_EQ(state->live_segments(), 0);
  EXPECT_EQ(state->live_bytes(), 0u);
  EXPECT_TRUE(state->violations().empty());
  EXPECT_EQ(events->outstanding(), 0);
  EXPECT_TRUE(events->violations().empty());
  EXPECT_EQ(CheckPoolInvariants(pool), "");
}

// Blocks change hands: each thread frees some of its own blocks and some that other
// threads allocated, so thread caches receive foreign blocks and a thread's memory of
// what it handed out goes stale (the block was freed elsewhere, merged, handed out
// again at the same address). Tags catch any block given to two owners at once.
class HandOffTest : public ::testing::TestWithParam<int> {};

// The parameter is thread_cache_blocks: with 1, most frees go back to the pool and
// merge, so addresses are handed out again through the pool's free sets, under block
// records other than the ones a thread remembers.
TEST_P(HandOffTest, BlocksFreedByOtherThreads) {
  auto backend = TestBackend::FakeCuda();
  auto state = backend->state();
  AllocatorOptions options;
  options.thread_cache_blocks = GetParam();
  auto created = CachingAllocator::Create(std::move(backend), options);
  ASSERT_TRUE(created.ok()) << created.status();
  CachingAllocator& pool = **created;

  constexpr int kHandOffThreads = 4;
  constexpr int kOps = 200'000;
  std::mutex shared_mu;
  std::vector<Live> shared;  // Blocks any thread may free.
  std::atomic<int> failures{0};
  std::atomic<uint64_t> tag_source{1};
  auto check_and_free = [&](const Live& l) {
    if (!TagIntact(l)) {
      ADD_FAILURE() << "block " << static_cast<void*>(l.ptr) << " was overwritten";
      failures.fetch_add(1);
    }
    if (absl::Status s = pool.Free(l.ptr); !s.ok()) {
      ADD_FAILURE() << s;
      failures.fetch_add(1);
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kHandOffThreads; ++t) {
    threads.emplace_back([&, t] {
      uint64_t rng = 0xD1B54A32D192ED03ull * (t + 1);
      std::vector<Live> mine;
      for (int i = 0; i < kOps && failures.load() == 0; ++i) {
        const uint64_t r = Next(rng);
        if (r % 3 != 0 || mine.empty()) {
          // Few sizes, so that blocks recur in thread caches; some large ones too.
          const size_t size = size_t{512} << (r % 7) << (r % 11 == 0 ? 12 : 0);
          auto p = pool.Allocate(size);
          if (!p.ok()) {
            ADD_FAILURE() << p.status();
            failures.fetch_add(1);
            break;
          }
          Live l{static_cast<char*>(*p), 16, tag_source.fetch_add(1)};
          WriteTag(l);
          if (r % 2 == 0) {
            mine.push_back(l);
          } else {
            std::lock_guard<std::mutex> lock(shared_mu);
            shared.push_back(l);
          }
        }
        if (r % 5 == 0 && !mine.empty()) {
          check_and_free(mine.back());
          mine.pop_back();
        }
        if (r % 4 == 0) {
          std::optional<Live> theirs;
          {
            std::lock_guard<std::mutex> lock(shared_mu);
            if (!shared.empty()) {
              theirs = shared[r % shared.size()];
              shared[r % shared.size()] = shared.back();
              shared.pop_back();
            }
          }
          if (theirs.has_value()) check_and_free(*theirs);
        }
        if (r % 20'000 == 0) (void)pool.EmptyCache();
      }
      for (const Live& l : mine) check_and_free(l);
    });
  }
  for (auto& th : threads) th.join();
  for (const Live& l : shared) check_and_free(l);
  ASSERT_EQ(failures.load(), 0);
  EXPECT_EQ(CheckPoolInvariants(pool), "");
  const MemoryStats st = pool.Stats();
  EXPECT_EQ(st.all.allocated_bytes.current, 0);
  EXPECT_EQ(st.num_allocations, st.num_frees);
  ASSERT_TRUE(pool.Compact().ok());
  EXPECT_EQ(pool.Stats().all.reserved_bytes.current, 0);
  EXPECT_EQ(state->live_segments(), 0);
  EXPECT_TRUE(state->violations().empty());
}

INSTANTIATE_TEST_SUITE_P(ThreadCacheBlocks, HandOffTest, ::testing::Values(8, 1));

}  // namespace
}  // namespace genesis::memory
