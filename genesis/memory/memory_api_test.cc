#include "genesis/memory/memory_api.h"

#include <cstdlib>
#include <string>

#include "genesis/cuda/device_query.h"
#include "genesis/cuda/test_util.h"
#include "genesis/memory/pool_registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace genesis::memory {
namespace {

using ::testing::HasSubstr;

// The process-wide pools are shared by all tests here, so each test measures changes.
void ExpectSeedApiTracks(const Device& device, StreamId stream) {
  CachingAllocator* pool = PoolFor(device).value();
  ASSERT_TRUE(empty_cache(device).ok());
  ASSERT_TRUE(reset_memory_stats(device).ok());
  const int64_t before = memory_allocated(device).value();

  void* p = pool->Allocate(3 << 20, stream).value();
  EXPECT_EQ(memory_allocated(device).value(), before + (3 << 20));
  EXPECT_GE(max_memory_allocated(device).value(), before + (3 << 20));
  EXPECT_EQ(memory_reserved(device).value(),
            memory_allocated(device).value() + memory_cached(device).value());
  const auto stats = memory_stats(device).value();
  EXPECT_EQ(stats.at("allocated_bytes.all.current"), memory_allocated(device).value());
  EXPECT_GE(stats.at("num_allocations"), 1);
  EXPECT_THAT(memory_summary(device).value(), HasSubstr("llocated"));
  EXPECT_FALSE(memory_snapshot(device).value().empty());

  ASSERT_TRUE(pool->Free(p).ok());
  EXPECT_EQ(memory_allocated(device).value(), before);
  EXPECT_GT(memory_cached(device).value(), 0);
  EXPECT_GT(max_memory_cached(device).value(), 0);
  ASSERT_TRUE(empty_cache(device).ok());
  EXPECT_EQ(memory_cached(device).value(), 0);

  ASSERT_TRUE(reset_memory_stats(device).ok());
  EXPECT_EQ(max_memory_allocated(device).value(), memory_allocated(device).value());
  EXPECT_EQ(memory_stats(device).value().at("num_allocations"), 0);
}

TEST(MemoryApiTest, TracksTheHostPool) { ExpectSeedApiTracks(Device::Cpu(), kNoStream); }

TEST(MemoryApiTest, TracksTheDevicePool) {
  GENESIS_SKIP_WITHOUT_GPU();
  ExpectSeedApiTracks(Device::Cuda(0), kNoStream);
}

TEST(MemoryApiTest, NamesADeviceThatDoesNotExist) {
  const auto status = memory_allocated(Device::Cuda(99)).status();
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(std::string(status.message()), HasSubstr("cuda:99"));
  EXPECT_FALSE(empty_cache(Device::Cuda(99)).ok());
}

TEST(PoolRegistryTest, CreatesSeparatePoolsOnRequest) {
  auto a = CreatePool(Device::Cpu(), AllocConfig{});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_NE(a->get(), HostPool().value());
  void* p = (*a)->Allocate(1000).value();
  EXPECT_TRUE((*a)->Owns(p));
  EXPECT_FALSE(HostPool().value()->Owns(p));
  ASSERT_TRUE((*a)->Free(p).ok());
  EXPECT_FALSE(CreatePool(Device::Cuda(99), AllocConfig{}).ok());
}

TEST(PoolRegistryTest, ReturnsTheSamePoolEveryTime) {
  EXPECT_EQ(HostPool().value(), PoolFor(Device::Cpu()).value());
}

TEST(PoolRegistryTest, ConfigCannotChangeOnceAPoolExists) {
  ASSERT_TRUE(HostPool().ok());
  const absl::Status status = SetDefaultAllocConfig(AllocConfig{});
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("already exists"));
}

TEST(PoolRegistryTest, PlainHostMemoryIsNotPinned) {
  EXPECT_FALSE(IsPinned(nullptr));
  void* plain = std::malloc(4096);
  EXPECT_FALSE(IsPinned(plain));
  void* pooled = HostPool().value()->Allocate(4096).value();
  EXPECT_FALSE(IsPinned(pooled));
  ASSERT_TRUE(HostPool().value()->Free(pooled).ok());
  std::free(plain);
}

TEST(PoolRegistryTest, PinnedPoolMemoryIsPinned) {
  if (!cuda::BuiltWithCuda()) {
    EXPECT_EQ(PinnedHostPool().status().code(), absl::StatusCode::kFailedPrecondition);
    GTEST_SKIP() << "CPU-only build: no pinned pool";
  }
  GENESIS_SKIP_WITHOUT_GPU();
  CachingAllocator* pinned = PinnedHostPool().value();
  void* p = pinned->Allocate(1 << 20).value();
  EXPECT_TRUE(IsPinned(p));
  EXPECT_TRUE(IsPinned(static_cast<char*>(p) + 4096));
  ASSERT_TRUE(pinned->Free(p).ok());
}

}  // namespace
}  // namespace genesis::memory
