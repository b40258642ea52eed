#include "genesis/memory/pool/pending_frees.h"

#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "genesis/memory/fake_stream_events.h"
#include "genesis/memory/pool/block.h"

namespace genesis::memory::pool_internal {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr StreamId kOther = 0x20;
constexpr StreamId kThird = 0x30;

TEST(PendingFreesTest, ABlockStaysPendingUntilEveryStreamsEventCompletes) {
  FakeStreamEvents events;
  PendingFrees pending(&events);
  Block b;
  b.recorded_streams = {kOther, kThird};
  absl::StatusOr<std::vector<EventId>> recorded = pending.RecordEvents(b);
  ASSERT_TRUE(recorded.ok());
  ASSERT_EQ(recorded->size(), 2u);
  pending.Add(&b, *recorded);
  EXPECT_EQ(b.state.load(), State::kPending);
  EXPECT_EQ(b.pending_events, 2);

  std::vector<Block*> done;
  auto collect = [&](Block* block) { done.push_back(block); };
  ASSERT_TRUE(pending.Process(/*wait=*/false, collect).ok());
  EXPECT_THAT(done, IsEmpty());
  events.Complete(kOther);
  ASSERT_TRUE(pending.Process(/*wait=*/false, collect).ok());
  EXPECT_THAT(done, IsEmpty());
  EXPECT_EQ(b.pending_events, 1);
  events.Complete(kThird);
  ASSERT_TRUE(pending.Process(/*wait=*/false, collect).ok());
  EXPECT_THAT(done, ElementsAre(&b));
  EXPECT_EQ(events.outstanding(), 0);
  EXPECT_THAT(events.violations(), IsEmpty());
}

TEST(PendingFreesTest, WaitingSynchronizesEveryEvent) {
  FakeStreamEvents events;
  PendingFrees pending(&events);
  Block a, b;
  a.recorded_streams = {kOther};
  b.recorded_streams = {kThird};
  pending.Add(&a, *pending.RecordEvents(a));
  pending.Add(&b, *pending.RecordEvents(b));
  std::vector<Block*> done;
  ASSERT_TRUE(pending.Process(/*wait=*/true, [&](Block* block) { done.push_back(block); }).ok());
  EXPECT_THAT(done, ElementsAre(&a, &b));
  EXPECT_EQ(events.synchronizes(), 2);
  EXPECT_EQ(events.outstanding(), 0);
}

TEST(PendingFreesTest, ABlockWithoutRecordedStreamsNeedsNoEvent) {
  FakeStreamEvents events;
  PendingFrees pending(&events);
  Block b;
  absl::StatusOr<std::vector<EventId>> recorded = pending.RecordEvents(b);
  ASSERT_TRUE(recorded.ok());
  EXPECT_THAT(*recorded, IsEmpty());
  EXPECT_EQ(events.records(), 0);
  EXPECT_TRUE(pending.Process(false, [](Block*) { FAIL(); }).ok());
}

TEST(PendingFreesTest, WaitAllReleasesWhatIsLeft) {
  FakeStreamEvents events;
  PendingFrees pending(&events);
  Block b;
  b.recorded_streams = {kOther, kThird};
  pending.Add(&b, *pending.RecordEvents(b));
  pending.WaitAll();
  EXPECT_EQ(events.outstanding(), 0);
  EXPECT_TRUE(pending.Process(false, [](Block*) { FAIL(); }).ok());
}

}  // namespace
}  // namespace genesis::memory::pool_internal
