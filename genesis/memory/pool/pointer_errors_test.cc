#include "genesis/memory/pool/pointer_errors.h"

#include <cstdint>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "genesis/memory/pool/block.h"
#include "genesis/memory/pool/segment_map.h"

namespace genesis::memory::pool_internal {
namespace {

using ::testing::HasSubstr;

// One 8 KiB segment at a made-up address: an allocated 4 KiB block, then a free one.
class PointerErrorsTest : public ::testing::Test {
 protected:
  PointerErrorsTest() {
    segment_.ptr = reinterpret_cast<char*>(uintptr_t{0x10000000});
    segment_.size = 8192;
    segment_.head = &allocated_;
    allocated_.ptr = segment_.ptr;
    allocated_.size = 4096;
    allocated_.segment = &segment_;
    allocated_.next = &free_;
    allocated_.state.store(State::kAllocated);
    free_.ptr = segment_.ptr + 4096;
    free_.size = 4096;
    free_.segment = &segment_;
    free_.prev = &allocated_;
    free_.state.store(State::kFree);
    segments_.Add(&segment_);
  }

  Segment segment_;
  Block allocated_;
  Block free_;
  SegmentMap segments_;
};

TEST_F(PointerErrorsTest, DoubleFree) {
  absl::Status s = BadPointerError(segments_, free_.ptr, "Free", "test backend");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("): double free: the block of 4096 bytes at "));
  EXPECT_THAT(s.message(), HasSubstr("is already free"));
}

TEST_F(PointerErrorsTest, InteriorPointers) {
  absl::Status s = BadPointerError(segments_, allocated_.ptr + 100, "RecordStream", "x");
  EXPECT_THAT(s.message(), HasSubstr("RecordStream("));
  EXPECT_THAT(s.message(), HasSubstr("not the start of a live allocation: it lies 100 bytes "
                                     "into an allocated block of 4096 bytes"));
  s = BadPointerError(segments_, free_.ptr + 512, "Free", "x");
  EXPECT_THAT(s.message(), HasSubstr("lies 512 bytes into a free block of 4096 bytes"));
}

TEST_F(PointerErrorsTest, ForeignPointers) {
  for (uintptr_t p : {uintptr_t{0x0fffffff}, uintptr_t{0x10002000}, uintptr_t{0x20000000}}) {
    absl::Status s = BadPointerError(segments_, reinterpret_cast<const void*>(p), "Free",
                                     "test backend");
    EXPECT_THAT(s.message(), HasSubstr("pointer was not allocated by this pool (test backend)"));
  }
}

}  // namespace
}  // namespace genesis::memory::pool_internal
