#include "genesis/transfer/copy.h"

#include <cstdint>
#include <numeric>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "genesis/cuda/device_query.h"
#include "genesis/cuda/test_util.h"
#include "genesis/memory/pool_registry.h"

namespace genesis::transfer {
namespace {

using ::testing::HasSubstr;

std::vector<uint8_t> Pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 31 + seed);
  return v;
}

TEST(CopyBytesTest, HostToHost) {
  const std::vector<uint8_t> src = Pattern(1000, 7);
  std::vector<uint8_t> dst(1000);
  ASSERT_TRUE(CopyBytes(dst.data(), Device::Cpu(), src.data(), Device::Cpu(), 1000).ok());
  EXPECT_EQ(dst, src);
  ASSERT_TRUE(
      CopyBytesAsync(dst.data(), Device::Cpu(), src.data(), Device::Cpu(), 0, nullptr).ok());
  EXPECT_TRUE(Synchronize(Device::Cpu(), nullptr).ok());
}

TEST(CopyBytesTest, ZeroBytesAcceptsNullPointers) {
  EXPECT_TRUE(CopyBytes(nullptr, Device::Cpu(), nullptr, Device::Cpu(), 0).ok());
}

TEST(CopyBytesTest, RejectsNullPointer) {
  std::vector<uint8_t> buf(8);
  const absl::Status status = CopyBytes(nullptr, Device::Cpu(), buf.data(), Device::Cpu(), 8);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("null"));
}

TEST(CopyBytesTest, RejectsOverlap) {
  std::vector<uint8_t> buf(64);
  const absl::Status status =
      CopyBytes(buf.data() + 8, Device::Cpu(), buf.data(), Device::Cpu(), 16);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("overlap"));
  // Adjacent ranges do not overlap.
  EXPECT_TRUE(CopyBytes(buf.data() + 16, Device::Cpu(), buf.data(), Device::Cpu(), 16).ok());
}

TEST(CopyBytesTest, RejectsMissingDevice) {
  std::vector<uint8_t> buf(8), out(8);
  const int missing = cuda::DeviceCount() + 3;
  const absl::Status status =
      CopyBytes(out.data(), Device::Cpu(), buf.data(), Device::Cuda(missing), 8);
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr(absl::StrCat("cuda:", missing)));
  EXPECT_FALSE(Synchronize(Device::Cuda(missing), nullptr).ok());
}

// Host (pageable and pinned) -> cuda:0 -> cuda:0 -> host, checked byte for byte.
TEST(CopyBytesTest, RoundTripThroughDevice) {
  GENESIS_SKIP_WITHOUT_GPU();
  constexpr size_t kBytes = (3 << 20) + 5;
  auto pool = memory::PoolFor(Device::Cuda(0));
  ASSERT_TRUE(pool.ok()) << pool.status();
  auto a = (*pool)->Allocate(kBytes);
  auto b = (*pool)->Allocate(kBytes);
  ASSERT_TRUE(a.ok() && b.ok());
  const std::vector<uint8_t> src = Pattern(kBytes, 3);
  std::vector<uint8_t> dst(kBytes);
  EXPECT_TRUE(CopyBytes(*a, Device::Cuda(0), src.data(), Device::Cpu(), kBytes).ok());
  EXPECT_TRUE(CopyBytesAsync(*b, Device::Cuda(0), *a, Device::Cuda(0), kBytes, nullptr).ok());
  EXPECT_TRUE(Synchronize(Device::Cuda(0), nullptr).ok());
  auto pinned_pool = memory::PinnedHostPool();
  ASSERT_TRUE(pinned_pool.ok()) << pinned_pool.status();
  auto pinned = (*pinned_pool)->Allocate(kBytes);
  ASSERT_TRUE(pinned.ok());
  EXPECT_TRUE(CopyBytes(*pinned, Device::Cpu(), *b, Device::Cuda(0), kBytes).ok());
  EXPECT_TRUE(CopyBytes(dst.data(), Device::Cpu(), *pinned, Device::Cpu(), kBytes).ok());
  EXPECT_EQ(dst, src);
  EXPECT_TRUE((*pinned_pool)->Free(*pinned).ok());
  EXPECT_TRUE((*pool)->Free(*a).ok());
  EXPECT_TRUE((*pool)->Free(*b).ok());
}

TEST(CopyBytesTest, BetweenTwoDevices) {
  GENESIS_SKIP_IF_FEWER_DEVICES(2);
  constexpr size_t kBytes = 1 << 20;
  auto pool0 = memory::PoolFor(Device::Cuda(0));
  auto pool1 = memory::PoolFor(Device::Cuda(1));
  ASSERT_TRUE(pool0.ok() && pool1.ok());
  auto a = (*pool0)->Allocate(kBytes);
  auto b = (*pool1)->Allocate(kBytes);
  ASSERT_TRUE(a.ok() && b.ok());
  const std::vector<uint8_t> src = Pattern(kBytes, 11);
  std::vector<uint8_t> dst(kBytes);
  EXPECT_TRUE(CopyBytes(*a, Device::Cuda(0), src.data(), Device::Cpu(), kBytes).ok());
  EXPECT_TRUE(CopyBytes(*b, Device::Cuda(1), *a, Device::Cuda(0), kBytes).ok());
  EXPECT_TRUE(CopyBytes(dst.data(), Device::Cpu(), *b, Device::Cuda(1), kBytes).ok());
  EXPECT_EQ(dst, src);
  EXPECT_TRUE((*pool0)->Free(*a).ok());
  EXPECT_TRUE((*pool1)->Free(*b).ok());
}

}  // namespace
}  // namespace genesis::transfer
