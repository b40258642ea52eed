#include "genesis/memory/pool/summary.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "genesis/memory/memory_stats.h"

namespace genesis::memory::pool_internal {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(SummaryTest, TableOfGaugesAndCounters) {
  MemoryStats st;
  st.all.allocated_bytes = {.current = 2048, .peak = 4096, .allocated = 8192, .freed = 6144};
  st.large_pool.allocated_bytes.current = 1024;
  st.num_allocations = 7;
  st.num_frees = 5;
  st.num_cache_hits = 3;
  st.num_cache_misses = 1;
  st.num_segments = 2;
  st.num_segment_allocs = 4;
  st.num_segment_frees = 2;
  const std::string table = FormatSummary(st, "cpu", "host (aligned_alloc)", false, 0);
  EXPECT_THAT(table, HasSubstr(" CachingAllocator summary: cpu (host (aligned_alloc))\n"));
  EXPECT_THAT(table, HasSubstr(
                         "\n Allocated memory               |     2.0 KiB |     4.0 KiB |"
                         "     8.0 KiB |     6.0 KiB\n"));
  EXPECT_THAT(table, HasSubstr("\n   from large pool              |     1.0 KiB |"));
  EXPECT_THAT(table, HasSubstr(" Allocations                    | 7\n"));
  EXPECT_THAT(table, HasSubstr("3 hits, 1 misses (75.0% hit rate)"));
  EXPECT_THAT(table, HasSubstr("2 now, 4 allocated, 2 freed"));
  EXPECT_THAT(table, Not(HasSubstr("Expandable segments")));
  EXPECT_THAT(FormatSummary(st, "cpu", "x", true, 2 << 20),
              HasSubstr("0 maps, 0 unmaps (chunks of 2.0 MiB)"));
}

}  // namespace
}  // namespace genesis::memory::pool_internal
