// DeviceGuard on real GPUs; skips (saying why) without one.

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "genesis/cuda/device_guard.h"
#include "genesis/cuda/device_query.h"
#include "genesis/cuda/test_util.h"
#include "gtest/gtest.h"

namespace genesis::cuda {
namespace {

int Current() {
  const absl::StatusOr<int> device = CurrentDevice();
  EXPECT_TRUE(device.ok()) << device.status();
  return device.value_or(-1);
}

TEST(DeviceGuardTest, RestoresPreviousDevice) {
  GENESIS_SKIP_WITHOUT_GPU();
  const int last = DeviceCount() - 1;
  const int before = Current();
  {
    absl::StatusOr<DeviceGuard> guard = DeviceGuard::Create(last);
    ASSERT_TRUE(guard.ok()) << guard.status();
    EXPECT_EQ(guard->device(), last);
    EXPECT_EQ(guard->previous_device(), before);
    EXPECT_EQ(Current(), last);
  }
  EXPECT_EQ(Current(), before);
}

TEST(DeviceGuardTest, Nests) {
  GENESIS_SKIP_WITHOUT_GPU();
  const int last = DeviceCount() - 1;
  const int before = Current();
  {
    absl::StatusOr<DeviceGuard> outer = DeviceGuard::Create(last);
    ASSERT_TRUE(outer.ok()) << outer.status();
    {
      absl::StatusOr<DeviceGuard> inner = DeviceGuard::Create(0);
      ASSERT_TRUE(inner.ok()) << inner.status();
      EXPECT_EQ(Current(), 0);
    }
    EXPECT_EQ(Current(), last);
  }
  EXPECT_EQ(Current(), before);
}

TEST(DeviceGuardTest, MoveTransfersTheRestore) {
  GENESIS_SKIP_WITHOUT_GPU();
  const int last = DeviceCount() - 1;
  const int before = Current();
  {
    absl::StatusOr<DeviceGuard> guard = DeviceGuard::Create(last);
    ASSERT_TRUE(guard.ok()) << guard.status();
    DeviceGuard moved = *std::move(guard);
    EXPECT_EQ(Current(), last);
    {
      DeviceGuard moved_again = std::move(moved);
      EXPECT_EQ(Current(), last);
    }
    // moved_again restored; `moved` and the StatusOr's guard are empty.
    EXPECT_EQ(Current(), before);
  }
  EXPECT_EQ(Current(), before);
}

TEST(DeviceGuardTest, MissingDeviceLeavesCurrentDeviceAlone) {
  GENESIS_SKIP_WITHOUT_GPU();
  const int before = Current();
  const absl::StatusOr<DeviceGuard> guard = DeviceGuard::Create(DeviceCount());
  EXPECT_EQ(guard.status().code(), absl::StatusCode::kOutOfRange) << guard.status();
  EXPECT_EQ(Current(), before);
}

}  // namespace
}  // namespace genesis::cuda
