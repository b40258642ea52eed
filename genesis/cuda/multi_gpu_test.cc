// genesis/cuda across two GPUs: device mismatches are refused with clear errors, and
// what CUDA allows across devices works. Needs 2 devices; skips (saying why) otherwise.

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "genesis/cuda/device_guard.h"
#include "genesis/cuda/device_query.h"
#include "genesis/cuda/event.h"
#include "genesis/cuda/stream.h"
#include "genesis/cuda/test_util.h"
#include "gtest/gtest.h"

namespace genesis::cuda {
namespace {

TEST(MultiGpuTest, EventRefusesStreamOfAnotherDevice) {
  GENESIS_SKIP_IF_FEWER_DEVICES(2);
  absl::StatusOr<Stream> stream = Stream::Create(1);
  absl::StatusOr<Event> event = Event::Create(0);
  ASSERT_TRUE(stream.ok() && event.ok());

  const absl::Status status = event->Record(*stream);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "cuda:0")) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "cuda:1")) << status;
  EXPECT_FALSE(event->recorded());

  // The same through the raw handle (checked with cudaStreamGetDevice).
  const absl::Status raw = event->Record(stream->native());
  EXPECT_EQ(raw.code(), absl::StatusCode::kInvalidArgument) << raw;
  EXPECT_TRUE(absl::StrContains(raw.message(), "cuda:1")) << raw;

  // Nothing was left poisoned: recording on a stream of device 0 works.
  absl::StatusOr<Stream> own = Stream::Create(0);
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_TRUE(event->Record(*own).ok());
  EXPECT_TRUE(event->Synchronize().ok());
}

TEST(MultiGpuTest, ElapsedTimeNeedsOneDevice) {
  GENESIS_SKIP_IF_FEWER_DEVICES(2);
  absl::StatusOr<Stream> s0 = Stream::Create(0);
  absl::StatusOr<Stream> s1 = Stream::Create(1);
  absl::StatusOr<Event> e0 = Event::Create(0, true);
  absl::StatusOr<Event> e1 = Event::Create(1, true);
  ASSERT_TRUE(s0.ok() && s1.ok() && e0.ok() && e1.ok());
  ASSERT_TRUE(e0->Record(*s0).ok());
  ASSERT_TRUE(e1->Record(*s1).ok());
  ASSERT_TRUE(e0->Synchronize().ok() && e1->Synchronize().ok());
  const absl::StatusOr<float> ms = Event::ElapsedMs(*e0, *e1);
  EXPECT_EQ(ms.status().code(), absl::StatusCode::kInvalidArgument) << ms.status();
}

TEST(MultiGpuTest, StreamWaitsForEventOfAnotherDevice) {
  GENESIS_SKIP_IF_FEWER_DEVICES(2);
  absl::StatusOr<Stream> s0 = Stream::Create(0);
  absl::StatusOr<Stream> s1 = Stream::Create(1);
  absl::StatusOr<Event> e0 = Event::Create(0);
  ASSERT_TRUE(s0.ok() && s1.ok() && e0.ok());
  ASSERT_TRUE(e0->Record(*s0).ok());
  EXPECT_TRUE(s1->Wait(*e0).ok());
  EXPECT_TRUE(s1->Synchronize().ok());
}

TEST(MultiGpuTest, DeviceGuardSwitchesBetweenDevices) {
  GENESIS_SKIP_IF_FEWER_DEVICES(2);
  absl::StatusOr<DeviceGuard> on_zero = DeviceGuard::Create(0);
  ASSERT_TRUE(on_zero.ok()) << on_zero.status();
  {
    absl::StatusOr<DeviceGuard> on_one = DeviceGuard::Create(1);
    ASSERT_TRUE(on_one.ok()) << on_one.status();
    EXPECT_EQ(on_one->previous_device(), 0);
    EXPECT_EQ(CurrentDevice().value(), 1);
  }
  EXPECT_EQ(CurrentDevice().value(), 0);
}

TEST(MultiGpuTest, ObjectsOfDevice1DestroyedWhileDevice0IsCurrent) {
  GENESIS_SKIP_IF_FEWER_DEVICES(2);
  absl::StatusOr<DeviceGuard> on_zero = DeviceGuard::Create(0);
  ASSERT_TRUE(on_zero.ok()) << on_zero.status();
  {
    absl::StatusOr<Stream> stream = Stream::Create(1);
    absl::StatusOr<Event> event = Event::Create(1);
    ASSERT_TRUE(stream.ok() && event.ok());
    ASSERT_TRUE(event->Record(*stream).ok());
  }
  EXPECT_EQ(CurrentDevice().value(), 0);
}

TEST(MultiGpuTest, PeerMatrixCoversEveryDevice) {
  GENESIS_SKIP_IF_FEWER_DEVICES(2);
  const absl::StatusOr<std::vector<std::vector<bool>>> matrix = PeerAccessMatrix();
  ASSERT_TRUE(matrix.ok()) << matrix.status();
  ASSERT_EQ(matrix->size(), static_cast<size_t>(DeviceCount()));
  for (size_t i = 0; i < matrix->size(); ++i) {
    ASSERT_EQ((*matrix)[i].size(), matrix->size());
    EXPECT_TRUE((*matrix)[i][i]);
  }
}

}  // namespace
}  // namespace genesis::cuda
