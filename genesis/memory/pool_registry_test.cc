// ReleaseCachedMemory over the registry's host pool (device pools are covered by the
// GPU tests, which call it before they exit).
#include "genesis/memory/pool_registry.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace genesis::memory {
namespace {

using ::testing::HasSubstr;

TEST(ReleaseCachedMemoryTest, GivesCachedMemoryBackAndNamesLiveBlocks) {
  absl::StatusOr<CachingAllocator*> pool = HostPool();
  ASSERT_TRUE(pool.ok()) << pool.status();
  // Large blocks, each in a segment of its own.
  absl::StatusOr<void*> kept = (*pool)->Allocate(12 << 20, kNoStream);
  absl::StatusOr<void*> freed = (*pool)->Allocate(16 << 20, kNoStream);
  ASSERT_TRUE(kept.ok() && freed.ok());
  ASSERT_TRUE((*pool)->Free(*freed).ok());
  EXPECT_EQ((*pool)->Stats().all.reserved_bytes.current, 28 << 20);

  const absl::Status held = ReleaseCachedMemory();
  EXPECT_EQ(held.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(held.message()), HasSubstr("host: 12.0 MiB in live blocks"));
  // The cached block went back; the live one's segment stays.
  EXPECT_EQ((*pool)->Stats().all.allocated_bytes.current, 12 << 20);
  EXPECT_EQ((*pool)->Stats().all.reserved_bytes.current, 12 << 20);

  ASSERT_TRUE((*pool)->Free(*kept).ok());
  EXPECT_TRUE(ReleaseCachedMemory().ok());
  EXPECT_EQ((*pool)->Stats().all.reserved_bytes.current, 0);
}

TEST(DeviceVirtualMemoryTest, FailsForADeviceThatDoesNotExist) {
  // OutOfRange in a CUDA build, FailedPrecondition in the CPU-only build.
  const absl::Status status = DeviceVirtualMemory(99).status();
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(std::string(status.message()), HasSubstr("cuda:99")) << status;
}

}  // namespace
}  // namespace genesis::memory
