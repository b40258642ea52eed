// The state the segment tests share (classic and expandable segments, the release
// policies, segment growth): the pool's options, statistics, free sets and segment
// map, which the code under test is built over, and the gauge they read most.
#ifndef GENESIS_MEMORY_POOL_SEGMENT_TEST_BASE_H_
#define GENESIS_MEMORY_POOL_SEGMENT_TEST_BASE_H_

#include <cstdint>

#include "genesis/memory/allocator_options.h"
#include "genesis/memory/pool/free_sets.h"
#include "genesis/memory/pool/pool_stats.h"
#include "genesis/memory/pool/segment_map.h"
#include "genesis/memory/pool/stat_index.h"
#include "gtest/gtest.h"

namespace genesis::memory::pool_internal {

class SegmentTestBase : public ::testing::Test {
 protected:
  // Reserved bytes over every pool.
  int64_t Reserved() const { return stats_.GaugeNow(kReservedBytes, kAllPools); }

  AllocatorOptions options_;
  PoolStats stats_;
  FreeSets free_{options_, stats_};
  SegmentMap segments_;
};

}  // namespace genesis::memory::pool_internal

#endif  // GENESIS_MEMORY_POOL_SEGMENT_TEST_BASE_H_
