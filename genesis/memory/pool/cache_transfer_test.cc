#include "genesis/memory/pool/cache_transfer.h"

#include <cstdint>
#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "genesis/memory/memory_stats.h"
#include "genesis/memory/pool/block.h"
#include "genesis/memory/pool/pool_stats.h"
#include "genesis/memory/pool/stat_index.h"
#include "genesis/memory/pool/thread_cache.h"
#include "genesis/memory/pool/thread_cache_registry.h"

namespace genesis::memory::pool_internal {
namespace {

using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

constexpr ThreadCacheLimits kLimits{/*max_bytes=*/1 << 20, /*max_blocks_per_bin=*/8,
                                    /*large_blocks=*/true};

struct TestBlock {
  explicit TestBlock(uintptr_t address) {
    block.ptr = reinterpret_cast<char*>(address);
    block.size = 4096;
    block.pool = kSmall;
    block.state.store(State::kAllocated);
  }
  Block block;
};

// Two caches of one pool, each holding one freed block.
class CacheTransferTest : public ::testing::Test {
 protected:
  CacheTransferTest() {
    registry_.caches = {first_, second_};
    EXPECT_TRUE(first_->Push(&a_.block, 100, kLimits));
    EXPECT_TRUE(second_->Push(&b_.block, 200, kLimits));
  }

  PoolStats stats_;
  ThreadCacheRegistry registry_;
  std::shared_ptr<ThreadCache> first_ = std::make_shared<ThreadCache>();
  std::shared_ptr<ThreadCache> second_ = std::make_shared<ThreadCache>();
  TestBlock a_{0x10000000};
  TestBlock b_{0x20000000};
  std::vector<Block*> returned_;
};

TEST_F(CacheTransferTest, FlushAllCachesReturnsEveryBlockAndFoldsTheFigures) {
  FlushAllCaches(registry_, stats_, [&](const std::vector<Block*>& blocks) {
    returned_.insert(returned_.end(), blocks.begin(), blocks.end());
  });
  EXPECT_THAT(returned_, UnorderedElementsAre(&a_.block, &b_.block));
  EXPECT_EQ(first_->bytes.load(), 0u);
  EXPECT_EQ(second_->bytes.load(), 0u);
  const MemoryStats m = stats_.Collect(CacheFigures());
  EXPECT_EQ(m.num_frees, 2);
  EXPECT_EQ(m.all.cached_bytes.current, 8192);
  EXPECT_EQ(m.all.requested_bytes.freed, 300);

  // Nothing left: the callback is not called.
  FlushAllCaches(registry_, stats_, [](const std::vector<Block*>&) { FAIL(); });
}

TEST_F(CacheTransferTest, FlushOwnCacheTakesOnlyThatCache) {
  EXPECT_TRUE(FlushOwnCache(*first_, stats_, [&](const std::vector<Block*>& blocks) {
    returned_ = blocks;
  }));
  EXPECT_THAT(returned_, UnorderedElementsAre(&a_.block));
  EXPECT_FALSE(FlushOwnCache(*first_, stats_, [](const std::vector<Block*>&) { FAIL(); }));
  EXPECT_EQ(second_->bytes.load(), 4096u);
}

TEST_F(CacheTransferTest, AnExitingThreadsCacheLeavesTheRegistryEmpty) {
  AdoptExitingCache(registry_, second_, stats_, [&](const std::vector<Block*>& blocks) {
    returned_ = blocks;
  });
  EXPECT_THAT(returned_, UnorderedElementsAre(&b_.block));
  ASSERT_EQ(registry_.caches.size(), 1u);
  EXPECT_EQ(registry_.caches[0], first_);
  EXPECT_THAT(second_->bins, IsEmpty());
  EXPECT_EQ(second_->Bin(4096, kNoStream, /*create=*/false), nullptr);
}

TEST_F(CacheTransferTest, StatisticsAreReadOrFoldedWithoutTakingBlocks) {
  CacheFigures figures;
  ReadAllCaches(registry_, &figures);
  EXPECT_EQ(figures.excess.size(), 2u);
  EXPECT_EQ(figures.counters[kNumFrees], 2);
  EXPECT_EQ(figures.current[kCachedBytes][kSmall], 8192);
  FoldOwnCurrent(*first_, stats_);
  EXPECT_EQ(stats_.GaugeNow(kCachedBytes, kAllPools), 4096);
  FoldAllCaches(registry_, stats_);
  EXPECT_EQ(stats_.GaugeNow(kCachedBytes, kAllPools), 8192);
  EXPECT_EQ(stats_.Collect(CacheFigures()).num_frees, 2);
  EXPECT_EQ(first_->bytes.load(), 4096u);  // The blocks stay cached.
}

}  // namespace
}  // namespace genesis::memory::pool_internal
