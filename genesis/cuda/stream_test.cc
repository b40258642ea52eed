// Stream on real GPUs; skips (saying why) without one.

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

TEST(StreamTest, CreateSynchronizeQueryOnEveryDevice) {
  GENESIS_SKIP_WITHOUT_GPU();
  for (int device = 0; device < DeviceCount(); ++device) {
    absl::StatusOr<Stream> stream = Stream::Create(device);
    ASSERT_TRUE(stream.ok()) << stream.status();
    EXPECT_TRUE(stream->valid());
    EXPECT_NE(stream->native(), nullptr);
    EXPECT_EQ(stream->device(), device);
    EXPECT_TRUE(stream->non_blocking());
    EXPECT_EQ(stream->priority(), 0);
    EXPECT_TRUE(stream->Synchronize().ok());
    const absl::StatusOr<bool> ready = stream->Query();
    ASSERT_TRUE(ready.ok()) << ready.status();
    EXPECT_TRUE(*ready);  // Nothing queued.
  }
}

TEST(StreamTest, BlockingStreamAndHighPriority) {
  GENESIS_SKIP_WITHOUT_GPU();
  absl::StatusOr<Stream> blocking = Stream::Create(0, /*non_blocking=*/false);
  ASSERT_TRUE(blocking.ok()) << blocking.status();
  EXPECT_FALSE(blocking->non_blocking());
  EXPECT_TRUE(blocking->Synchronize().ok());

  // Every device since Kepler has at least the priorities [-1, 0].
  absl::StatusOr<Stream> high = Stream::Create(0, /*non_blocking=*/true, /*priority=*/-1);
  ASSERT_TRUE(high.ok()) << high.status();
  EXPECT_EQ(high->priority(), -1);
  EXPECT_TRUE(high->Synchronize().ok());

  // The highest priority is at most -1, and a stream may have it.
  absl::StatusOr<int> highest = Stream::HighestPriority(0);
  ASSERT_TRUE(highest.ok()) << highest.status();
  EXPECT_LE(*highest, -1);
  absl::StatusOr<Stream> top = Stream::Create(0, true, *highest);
  ASSERT_TRUE(top.ok()) << top.status();
  EXPECT_EQ(top->priority(), *highest);
  // A device that does not exist.
  EXPECT_EQ(Stream::HighestPriority(DeviceCount()).status().code(),
            absl::StatusCode::kOutOfRange);
}

TEST(StreamTest, PriorityOutsideRangeIsInvalidArgument) {
  GENESIS_SKIP_WITHOUT_GPU();
  for (int priority : {1000, -1000}) {
    const absl::StatusOr<Stream> stream = Stream::Create(0, true, priority);
    EXPECT_EQ(stream.status().code(), absl::StatusCode::kInvalidArgument)
        << stream.status();
    EXPECT_TRUE(absl::StrContains(stream.status().message(), std::to_string(priority)))
        << stream.status();
  }
}

TEST(StreamTest, CreateLeavesCurrentDeviceAlone) {
  GENESIS_SKIP_WITHOUT_GPU();
  const absl::StatusOr<int> before = CurrentDevice();
  ASSERT_TRUE(before.ok()) << before.status();
  {
    absl::StatusOr<Stream> stream = Stream::Create(DeviceCount() - 1);
    ASSERT_TRUE(stream.ok()) << stream.status();
    EXPECT_EQ(CurrentDevice().value(), *before);
  }
  EXPECT_EQ(CurrentDevice().value(), *before);  // Also after destruction.
}

TEST(StreamTest, MoveLeavesSourceEmpty) {
  GENESIS_SKIP_WITHOUT_GPU();
  absl::StatusOr<Stream> created = Stream::Create(0);
  ASSERT_TRUE(created.ok()) << created.status();
  CUstream_st* const native = created->native();
  Stream stream = *std::move(created);
  EXPECT_EQ(stream.native(), native);

  Stream other = std::move(stream);
  EXPECT_FALSE(stream.valid());  // NOLINT(bugprone-use-after-move): tested on purpose.
  EXPECT_EQ(stream.device(), -1);
  EXPECT_EQ(other.native(), native);
  EXPECT_EQ(stream.Synchronize().code(), absl::StatusCode::kFailedPrecondition);

  // Assigning over a live stream destroys it first.
  absl::StatusOr<Stream> replacement = Stream::Create(0);
  ASSERT_TRUE(replacement.ok()) << replacement.status();
  other = *std::move(replacement);
  EXPECT_TRUE(other.valid());
  EXPECT_TRUE(other.Synchronize().ok());
}

TEST(StreamTest, ManyStreamsAreCreatedAndDestroyed) {
  GENESIS_SKIP_WITHOUT_GPU();
  for (int round = 0; round < 4; ++round) {
    std::vector<Stream> streams;
    for (int i = 0; i < 64; ++i) {
      absl::StatusOr<Stream> stream = Stream::Create(0, i % 2 == 0);
      ASSERT_TRUE(stream.ok()) << stream.status();
      streams.push_back(*std::move(stream));
    }
    for (const Stream& stream : streams) EXPECT_TRUE(stream.Synchronize().ok());
  }
}

TEST(StreamTest, WaitsForEvent) {
  GENESIS_SKIP_WITHOUT_GPU();
  absl::StatusOr<Stream> producer = Stream::Create(0);
  absl::StatusOr<Stream> consumer = Stream::Create(0);
  absl::StatusOr<Event> event = Event::Create(0);
  ASSERT_TRUE(producer.ok() && consumer.ok() && event.ok());
  ASSERT_TRUE(event->Record(*producer).ok());
  EXPECT_TRUE(consumer->Wait(*event).ok());
  EXPECT_TRUE(consumer->Synchronize().ok());
  EXPECT_TRUE(event->Query().value());
}

}  // namespace
}  // namespace genesis::cuda
