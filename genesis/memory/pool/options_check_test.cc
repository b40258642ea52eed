#include "genesis/memory/pool/options_check.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "genesis/memory/allocator_options.h"
#include "genesis/memory/host_backend.h"
#include "genesis/memory/test_backend.h"

namespace genesis::memory::pool_internal {
namespace {

using ::testing::HasSubstr;

TEST(OptionsCheckTest, DefaultsAreValidAndBadValuesAreNamed) {
  EXPECT_TRUE(ValidateOptions(AllocatorOptions()).ok());
  AllocatorOptions o;
  o.block_rounding = 768;
  EXPECT_THAT(ValidateOptions(o).message(),
              HasSubstr("block_rounding = 768 must be a power of two >= 512"));
  o = AllocatorOptions();
  o.small_segment_size = 512 * 1024;
  EXPECT_THAT(ValidateOptions(o).message(), HasSubstr("small_segment_size = 524288"));
  o = AllocatorOptions();
  o.roundup_power2_divisions = 3;
  EXPECT_THAT(ValidateOptions(o).message(), HasSubstr("roundup_power2_divisions = 3"));
  o = AllocatorOptions();
  o.memory_fraction = 0;
  EXPECT_EQ(ValidateOptions(o).code(), absl::StatusCode::kInvalidArgument);
  o = AllocatorOptions();
  o.expandable_piece_size = 3 * kMiB;
  EXPECT_THAT(ValidateOptions(o).message(),
              HasSubstr("expandable_piece_size = 3145728 must be a power of two"));
  o = AllocatorOptions();
  o.expandable_min_piece = 12 * kMiB;
  EXPECT_THAT(ValidateOptions(o).message(),
              HasSubstr("expandable_min_piece = 12582912 must be a power of two"));
  o = AllocatorOptions();
  o.thread_cache_blocks = -1;
  EXPECT_THAT(ValidateOptions(o).message(), HasSubstr("thread_cache_blocks = -1"));
}

TEST(OptionsCheckTest, TheBackendMustOfferWhatTheOptionsNeed) {
  AllocatorOptions o;
  HostBackend host;
  EXPECT_TRUE(CheckBackend(host, o).ok());
  o.expandable_segments = ExpandableSegments::kOn;
  EXPECT_EQ(CheckBackend(host, o).code(), absl::StatusCode::kFailedPrecondition);

  TestBackend::Options vo;
  vo.virtual_memory = true;
  vo.granularity = 4096;
  TestBackend fine_grained(vo);
  o.block_rounding = 8192;
  EXPECT_THAT(CheckBackend(fine_grained, o).message(),
              HasSubstr("has virtual memory granularity 4096"));
  o.expandable_segments = ExpandableSegments::kOff;  // Then granularity does not matter.
  EXPECT_TRUE(CheckBackend(fine_grained, o).ok());

  HostBackend loosely_aligned(256);
  EXPECT_THAT(CheckBackend(loosely_aligned, AllocatorOptions()).message(),
              HasSubstr("has alignment 256; the pool needs a power of two >= 512"));
}

// A backend that cannot tell its memory.
class NoInfoBackend : public HostBackend {
 public:
  absl::StatusOr<BackendMemoryInfo> MemoryInfo() const override {
    return absl::UnavailableError("no info");
  }
};

TEST(OptionsCheckTest, TotalBytesAreNeededOnlyForFractionAndGarbageCollection) {
  TestBackend::Options to;
  to.total_bytes = 1 << 30;
  TestBackend backend(to);
  AllocatorOptions o;
  EXPECT_EQ(*TotalBytes(backend, o), size_t{1} << 30);

  NoInfoBackend no_info;
  EXPECT_EQ(*TotalBytes(no_info, o), 0u);
  o.memory_fraction = 0.5;
  absl::StatusOr<size_t> total = TotalBytes(no_info, o);
  EXPECT_EQ(total.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(total.status().message(), HasSubstr("need the backend's total memory"));
  o = AllocatorOptions();
  o.garbage_collection_threshold = 0.5;
  EXPECT_FALSE(TotalBytes(no_info, o).ok());
}

}  // namespace
}  // namespace genesis::memory::pool_internal
