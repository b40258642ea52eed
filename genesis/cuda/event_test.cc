// Event on real GPUs; skips (saying why) without one.

#include <utility>

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

TEST(EventTest, RecordSynchronizeQuery) {
  GENESIS_SKIP_WITHOUT_GPU();
  for (int device = 0; device < DeviceCount(); ++device) {
    absl::StatusOr<Stream> stream = Stream::Create(device);
    ASSERT_TRUE(stream.ok()) << stream.status();
    absl::StatusOr<Event> event = Event::Create(device);
    ASSERT_TRUE(event.ok()) << event.status();
    EXPECT_TRUE(event->valid());
    EXPECT_NE(event->native(), nullptr);
    EXPECT_EQ(event->device(), device);
    EXPECT_FALSE(event->timing());
    EXPECT_FALSE(event->recorded());
    // Never recorded: complete by CUDA's definition.
    EXPECT_TRUE(event->Query().value());

    ASSERT_TRUE(event->Record(*stream).ok());
    EXPECT_TRUE(event->recorded());
    EXPECT_TRUE(event->Synchronize().ok());
    const absl::StatusOr<bool> done = event->Query();
    ASSERT_TRUE(done.ok()) << done.status();
    EXPECT_TRUE(*done);
  }
}

TEST(EventTest, RecordOnRawAndDefaultStreams) {
  GENESIS_SKIP_WITHOUT_GPU();
  const int last = DeviceCount() - 1;
  absl::StatusOr<Stream> stream = Stream::Create(last);
  absl::StatusOr<Event> event = Event::Create(last);
  ASSERT_TRUE(stream.ok() && event.ok());
  const absl::StatusOr<int> before = CurrentDevice();
  ASSERT_TRUE(before.ok()) << before.status();

  EXPECT_TRUE(event->Record(stream->native()).ok());
  EXPECT_TRUE(event->Synchronize().ok());
  // nullptr: the legacy default stream of the event's device.
  EXPECT_TRUE(event->Record(nullptr).ok());
  EXPECT_TRUE(event->Synchronize().ok());
  EXPECT_EQ(CurrentDevice().value(), *before);
}

TEST(EventTest, ElapsedTimeOfTimingEvents) {
  GENESIS_SKIP_WITHOUT_GPU();
  absl::StatusOr<Stream> stream = Stream::Create(0);
  absl::StatusOr<Event> start = Event::Create(0, /*timing=*/true);
  absl::StatusOr<Event> end = Event::Create(0, /*timing=*/true);
  ASSERT_TRUE(stream.ok() && start.ok() && end.ok());
  EXPECT_TRUE(start->timing());
  ASSERT_TRUE(start->Record(*stream).ok());
  ASSERT_TRUE(end->Record(*stream).ok());
  ASSERT_TRUE(end->Synchronize().ok());
  const absl::StatusOr<float> ms = Event::ElapsedMs(*start, *end);
  ASSERT_TRUE(ms.ok()) << ms.status();
  EXPECT_GE(*ms, 0.0f);
}

TEST(EventTest, ElapsedTimeNeedsTimingEvents) {
  GENESIS_SKIP_WITHOUT_GPU();
  absl::StatusOr<Stream> stream = Stream::Create(0);
  absl::StatusOr<Event> start = Event::Create(0);  // No timing.
  absl::StatusOr<Event> end = Event::Create(0, /*timing=*/true);
  ASSERT_TRUE(stream.ok() && start.ok() && end.ok());
  ASSERT_TRUE(start->Record(*stream).ok());
  ASSERT_TRUE(end->Record(*stream).ok());
  ASSERT_TRUE(end->Synchronize().ok());
  const absl::StatusOr<float> ms = Event::ElapsedMs(*start, *end);
  EXPECT_EQ(ms.status().code(), absl::StatusCode::kInvalidArgument) << ms.status();
  EXPECT_TRUE(absl::StrContains(ms.status().message(), "timing")) << ms.status();
  EXPECT_TRUE(absl::StrContains(ms.status().message(), "start")) << ms.status();
}

TEST(EventTest, ElapsedTimeNeedsRecordedEvents) {
  GENESIS_SKIP_WITHOUT_GPU();
  absl::StatusOr<Event> start = Event::Create(0, /*timing=*/true);
  absl::StatusOr<Event> end = Event::Create(0, /*timing=*/true);
  ASSERT_TRUE(start.ok() && end.ok());
  const absl::StatusOr<float> ms = Event::ElapsedMs(*start, *end);
  EXPECT_EQ(ms.status().code(), absl::StatusCode::kFailedPrecondition) << ms.status();
}

TEST(EventTest, MoveLeavesSourceEmpty) {
  GENESIS_SKIP_WITHOUT_GPU();
  absl::StatusOr<Event> created = Event::Create(0, /*timing=*/true);
  ASSERT_TRUE(created.ok()) << created.status();
  CUevent_st* const native = created->native();
  Event event = *std::move(created);
  Event other = std::move(event);
  EXPECT_FALSE(event.valid());  // NOLINT(bugprone-use-after-move): tested on purpose.
  EXPECT_EQ(other.native(), native);
  EXPECT_TRUE(other.timing());
  absl::StatusOr<Event> replacement = Event::Create(0);
  ASSERT_TRUE(replacement.ok()) << replacement.status();
  other = *std::move(replacement);
  EXPECT_FALSE(other.timing());
  EXPECT_TRUE(other.Query().value());
}

}  // namespace
}  // namespace genesis::cuda
