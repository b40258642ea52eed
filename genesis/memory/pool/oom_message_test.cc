#include "genesis/memory/pool/oom_message.h"

#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "genesis/memory/allocator_options.h"
#include "genesis/memory/backend.h"

namespace genesis::memory::pool_internal {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

OomFigures DeviceFigures() {
  OomFigures f;
  f.kind = MemoryKind::kDevice;
  f.device = "cuda:0";
  f.backend_name = "cuda:0 device (cudaMalloc)";
  f.requested = 3000000;
  f.size = 3000320;
  f.needed = 4194304;
  f.allocated = 8 * kMiB;
  f.reserved = 10 * kMiB;
  f.cached = 2 * kMiB;
  f.largest_free_block = kMiB;
  f.device_memory = BackendMemoryInfo{.free_bytes = 512 * 1024, .total_bytes = 16 * kMiB};
  f.memory_fraction = 1.0;
  f.allowed_max = kNoLimit;
  f.total_bytes = 16 * kMiB;
  f.max_split_size = kNoLimit;
  return f;
}

TEST(OomMessageTest, TheWholeMessageForABackendOutOfMemory) {
  OomReason why;
  why.backend_message = "out of memory";
  EXPECT_EQ(OomMessage(DeviceFigures(), why),
            "CUDA OOM: cuda:0 (cuda:0 device (cudaMalloc)) could not allocate 3000000 bytes "
            "(2.9 MiB) (rounded to 3000320 bytes, needing at most 4194304 bytes (4.0 MiB) "
            "from the backend). This pool has 8388608 bytes (8.0 MiB) allocated and "
            "10485760 bytes (10.0 MiB) reserved; the device has 524288 bytes (512.0 KiB) "
            "free of 16777216 bytes (16.0 MiB) total. Largest free block: 1048576 bytes "
            "(1.0 MiB); fragmentation ratio 0.50. The backend reported: out of memory. "
            "Advice: free tensors that are no longer needed or reduce the batch size.");
}

TEST(OomMessageTest, LabelsFollowTheMemoryKind) {
  OomFigures f = DeviceFigures();
  f.kind = MemoryKind::kPinnedHost;
  EXPECT_THAT(OomMessage(f, OomReason()), ::testing::StartsWith("pinned host OOM: "));
  f.kind = MemoryKind::kHost;
  EXPECT_THAT(OomMessage(f, OomReason()), ::testing::StartsWith("host OOM: "));
}

TEST(OomMessageTest, TheMemoryFractionLimitIsNamedWithItsAdvice) {
  OomFigures f = DeviceFigures();
  f.memory_fraction = 0.5;
  f.allowed_max = 8 * kMiB;
  OomReason why;
  why.limit_hit = true;
  const std::string msg = OomMessage(f, why);
  EXPECT_THAT(msg, HasSubstr("The limit hit was memory_fraction = 0.5, which caps this pool "
                             "at 8388608 bytes (8.0 MiB). "));
  EXPECT_THAT(msg, HasSubstr("Advice: raise memory_fraction if the device has room for more; "
                             "free tensors"));
  EXPECT_THAT(msg, Not(HasSubstr("The backend reported")));
}

TEST(OomMessageTest, UnknownDeviceMemoryAndARequestLargerThanTheDevice) {
  OomFigures f = DeviceFigures();
  f.device_memory = absl::UnavailableError("no driver");
  f.size = 32 * kMiB;
  const std::string msg = OomMessage(f, OomReason());
  EXPECT_THAT(msg, HasSubstr("the device's free and total memory are unknown (no driver). "));
  EXPECT_THAT(msg, HasSubstr("this single request is larger than the device's total memory"));
}

TEST(OomMessageTest, FragmentedCacheSuggestsMaxSplitSize) {
  OomFigures f = DeviceFigures();
  f.size = 2 * kMiB;  // Cached memory would hold it, but no free block does.
  f.cached = 4 * kMiB;
  EXPECT_THAT(OomMessage(f, OomReason()),
              HasSubstr("cached memory (4.0 MiB) is fragmented into blocks too small for "
                        "this request; setting max_split_size"));
  f.max_split_size = 8 * kMiB;  // Already set: no such advice.
  EXPECT_THAT(OomMessage(f, OomReason()), Not(HasSubstr("max_split_size")));
  f.max_split_size = kNoLimit;
  f.largest_free_block = 3 * kMiB;  // A block fits: not fragmentation.
  EXPECT_THAT(OomMessage(f, OomReason()), Not(HasSubstr("max_split_size")));
}

TEST(OomMessageTest, NothingCachedMeansNoFragmentation) {
  OomFigures f = DeviceFigures();
  f.cached = 0;
  f.largest_free_block = 0;
  EXPECT_THAT(OomMessage(f, OomReason()), HasSubstr("fragmentation ratio 0.00. "));
}

}  // namespace
}  // namespace genesis::memory::pool_internal
