#include "genesis/memory/pool/allocation_map.h"

#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "genesis/memory/pool/block.h"

namespace genesis::memory::pool_internal {
namespace {

std::unique_ptr<Block> AllocatedBlock(uintptr_t address, size_t size) {
  auto b = std::make_unique<Block>();
  b->ptr = reinterpret_cast<char*>(address);
  b->size = size;
  b->state.store(State::kAllocated);
  return b;
}

TEST(AllocationMapTest, FindsRegisteredAllocatedBlocksOnly) {
  AllocationMap map;
  auto b = AllocatedBlock(0x10000000, 4096);
  EXPECT_EQ(map.AllocatedSize(b->ptr), 0u);
  map.Register(b.get());
  EXPECT_EQ(map.AllocatedSize(b->ptr), 4096u);
  EXPECT_EQ(map.AllocatedSize(b->ptr + 512), 0u);  // Interior pointers are not blocks.
  b->state.store(State::kThreadCached);
  EXPECT_EQ(map.AllocatedSize(b->ptr), 0u);
  b->state.store(State::kAllocated);
  map.Unregister(b.get());
  EXPECT_EQ(map.AllocatedSize(b->ptr), 0u);
}

TEST(AllocationMapTest, WithAllocatedCallsOnlyForLiveBlocks) {
  AllocationMap map;
  auto b = AllocatedBlock(0x10000000, 4096);
  map.Register(b.get());
  EXPECT_TRUE(map.WithAllocated(b->ptr, [](Block& block) { block.recorded_streams.push_back(3); }));
  EXPECT_EQ(b->recorded_streams.size(), 1u);
  int calls = 0;
  EXPECT_FALSE(map.WithAllocated(b->ptr + 4096, [&](Block&) { ++calls; }));
  EXPECT_EQ(calls, 0);
}

TEST(AllocationMapTest, ClaimForFreeKeepsThreadCachedBlocksAndDropsOthers) {
  AllocationMap map;
  auto kept = AllocatedBlock(0x10000000, 4096);
  auto dropped = AllocatedBlock(0x20000000, 4096);
  map.Register(kept.get());
  map.Register(dropped.get());
  bool cached = false;
  const uint64_t seq = kept->alloc_seq.load();
  EXPECT_EQ(map.ClaimForFree(kept->ptr, [](const Block&) { return true; }, &cached), kept.get());
  EXPECT_TRUE(cached);
  EXPECT_EQ(kept->state.load(), State::kThreadCached);
  EXPECT_EQ(kept->alloc_seq.load(), seq + 1);  // Thread caches' records of it are stale.
  // Still in the map, but no longer allocated: a second free finds nothing.
  EXPECT_EQ(map.ClaimForFree(kept->ptr, [](const Block&) { return true; }, &cached), nullptr);

  EXPECT_EQ(map.ClaimForFree(dropped->ptr, [](const Block&) { return false; }, &cached),
            dropped.get());
  EXPECT_FALSE(cached);
  EXPECT_EQ(dropped->state.load(), State::kAllocated);
  EXPECT_EQ(map.AllocatedSize(dropped->ptr), 0u);  // Out of the map.
}

TEST(AllocationMapTest, ThreadsRegisterAndFreeConcurrently) {
  AllocationMap map;
  constexpr int kThreads = 4;
  constexpr int kBlocks = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&map, t] {
      std::vector<std::unique_ptr<Block>> blocks;
      for (int i = 0; i < kBlocks; ++i) {
        blocks.push_back(AllocatedBlock(0x10000000 + (uintptr_t{1} << 28) * t + 512 * i, 512));
        map.Register(blocks.back().get());
      }
      for (auto& b : blocks) {
        bool cached = true;
        ASSERT_EQ(map.ClaimForFree(b->ptr, [](const Block&) { return false; }, &cached),
                  b.get());
      }
    });
  }
  for (std::thread& t : threads) t.join();
}

}  // namespace
}  // namespace genesis::memory::pool_internal
