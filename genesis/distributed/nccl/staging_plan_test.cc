// The staging plan: which buffers of a registered operation get a slot, where, and
// which copies they need.
#include "genesis/distributed/nccl/staging_plan.h"

#include <vector>

#include "gtest/gtest.h"

namespace genesis::distributed::nccl_backend {
namespace {

char memory[4096];

StagedBuffer In(size_t offset, size_t bytes, bool registered = false) {
  return {memory + offset, bytes, /*read=*/true, /*written=*/false, registered};
}
StagedBuffer Out(size_t offset, size_t bytes, bool registered = false) {
  return {memory + offset, bytes, /*read=*/false, /*written=*/true, registered};
}

TEST(StagingPlanTest, RegisteredBuffersNeedNoSlot) {
  const std::vector<StagedBuffer> buffers = {In(0, 100, true), Out(128, 200, true)};
  const StagingPlan plan = PlanStaging(buffers);
  EXPECT_TRUE(plan.slots.empty());
  EXPECT_EQ(plan.bytes, 0u);
}

TEST(StagingPlanTest, EachUnregisteredBufferGetsAnAlignedSlotAndItsCopies) {
  // all_gather: the input is registered, the output is not.
  StagingPlan plan = PlanStaging(std::vector<StagedBuffer>{In(0, 100, true), Out(128, 300)});
  ASSERT_EQ(plan.slots.size(), 1u);
  EXPECT_EQ(plan.slots[0].buffer, 1u);
  EXPECT_EQ(plan.slots[0].offset, 0u);
  EXPECT_FALSE(plan.slots[0].copy_in);
  EXPECT_TRUE(plan.slots[0].copy_out);
  EXPECT_EQ(plan.bytes, 512u);
  // Neither: the output's slot follows the input's at the next 256 bytes.
  plan = PlanStaging(std::vector<StagedBuffer>{In(0, 100), Out(128, 300)});
  ASSERT_EQ(plan.slots.size(), 2u);
  EXPECT_EQ(plan.slots[0].offset, 0u);
  EXPECT_TRUE(plan.slots[0].copy_in);
  EXPECT_FALSE(plan.slots[0].copy_out);
  EXPECT_EQ(plan.slots[1].offset, kStagingAlignment);
  EXPECT_EQ(plan.bytes, kStagingAlignment + 512);
  for (const StagingSlot& slot : plan.slots) EXPECT_EQ(slot.offset % kStagingAlignment, 0u);
}

TEST(StagingPlanTest, ABufferNamedTwiceSharesOneSlotWithBothCopies) {
  // all_reduce in place: input and output are one buffer.
  const StagingPlan plan = PlanStaging(std::vector<StagedBuffer>{In(64, 1000), Out(64, 1000)});
  ASSERT_EQ(plan.slots.size(), 2u);
  EXPECT_EQ(plan.slots[0].offset, plan.slots[1].offset);
  EXPECT_TRUE(plan.slots[0].copy_in);
  EXPECT_TRUE(plan.slots[0].copy_out);
  EXPECT_FALSE(plan.slots[1].copy_in);  // Copied once, by the first.
  EXPECT_FALSE(plan.slots[1].copy_out);
  EXPECT_EQ(plan.bytes, 1024u);
}

TEST(StagingPlanTest, OverlappingButDifferentBuffersGetSlotsOfTheirOwn) {
  // An in-place all_gather's input is a part of its output.
  const StagingPlan plan = PlanStaging(std::vector<StagedBuffer>{In(256, 256), Out(0, 1024)});
  ASSERT_EQ(plan.slots.size(), 2u);
  EXPECT_NE(plan.slots[0].offset, plan.slots[1].offset);
  EXPECT_EQ(plan.bytes, 256u + 1024u);
}

TEST(StagingPlanTest, EmptyBuffersNeedNoSlot) {
  const StagingPlan plan =
      PlanStaging(std::vector<StagedBuffer>{In(0, 0), {nullptr, 64, true, false, false}});
  EXPECT_TRUE(plan.slots.empty());
  EXPECT_EQ(plan.bytes, 0u);
}

}  // namespace
}  // namespace genesis::distributed::nccl_backend
