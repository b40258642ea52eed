#include "genesis/transfer/adjacent_runs.h"

#include <cstddef>
#include <vector>

#include "genesis/core/device.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace genesis::transfer {
namespace {

using ::testing::ElementsAre;

// Request i copies sizes[i] bytes from src + src_at[i] to dst + dst_at[i].
std::vector<CopyRequest> Requests(const std::vector<size_t>& src_at,
                                  const std::vector<size_t>& dst_at,
                                  const std::vector<size_t>& sizes) {
  static char src[1 << 20];
  static char dst[1 << 20];
  std::vector<CopyRequest> requests;
  for (size_t i = 0; i < sizes.size(); ++i) {
    requests.push_back(CopyRequest{src + src_at[i], Device::Cuda(0), false, dst + dst_at[i],
                                   Device::Cuda(1), false, sizes[i]});
  }
  return requests;
}

TEST(AdjacentRunsTest, NoIndicesMakeNoRuns) {
  EXPECT_TRUE(FindAdjacentRuns(Requests({0}, {0}, {8}), {}).empty());
}

TEST(AdjacentRunsTest, ConsecutiveBuffersOnBothSidesAreOneRun) {
  const std::vector<CopyRequest> r = Requests({0, 100, 300}, {50, 150, 350}, {100, 200, 7});
  const std::vector<size_t> all = {0, 1, 2};
  EXPECT_THAT(FindAdjacentRuns(r, all), ElementsAre(AdjacentRun{0, 3, 307}));
}

TEST(AdjacentRunsTest, AGapOnEitherSideEndsARun) {
  // 1 follows 0 on the source only; 2 follows 1 on both; 3 follows 2 on the destination
  // only.
  const std::vector<CopyRequest> r =
      Requests({0, 10, 20, 1000}, {0, 500, 510, 520}, {10, 10, 10, 10});
  const std::vector<size_t> all = {0, 1, 2, 3};
  EXPECT_THAT(FindAdjacentRuns(r, all),
              ElementsAre(AdjacentRun{0, 1, 10}, AdjacentRun{1, 3, 20}, AdjacentRun{3, 4, 10}));
}

TEST(AdjacentRunsTest, FollowsTheOrderOfTheIndicesNotOfTheBatch) {
  // Requests 0 and 2 are adjacent; request 1, elsewhere, is not in the list.
  const std::vector<CopyRequest> r = Requests({0, 5000, 64}, {0, 9000, 64}, {64, 8, 64});
  const std::vector<size_t> group = {0, 2};
  EXPECT_THAT(FindAdjacentRuns(r, group), ElementsAre(AdjacentRun{0, 2, 128}));
  // In the other order 2 ends where 0 begins, which does not continue it.
  const std::vector<size_t> reversed = {2, 0};
  EXPECT_THAT(FindAdjacentRuns(r, reversed),
              ElementsAre(AdjacentRun{0, 1, 64}, AdjacentRun{1, 2, 64}));
}

TEST(AdjacentRunsTest, OnlyRunsOfAtLeastMinBytesAreReturned) {
  // Runs of 10, 20 and 10 bytes, as in AGapOnEitherSideEndsARun.
  const std::vector<CopyRequest> r =
      Requests({0, 10, 20, 1000}, {0, 500, 510, 520}, {10, 10, 10, 10});
  const std::vector<size_t> all = {0, 1, 2, 3};
  EXPECT_THAT(FindAdjacentRuns(r, all, 20), ElementsAre(AdjacentRun{1, 3, 20}));
  EXPECT_THAT(FindAdjacentRuns(r, all, 10),
              ElementsAre(AdjacentRun{0, 1, 10}, AdjacentRun{1, 3, 20}, AdjacentRun{3, 4, 10}));
  EXPECT_TRUE(FindAdjacentRuns(r, all, 21).empty());
  // The last run is checked too.
  const std::vector<CopyRequest> tail = Requests({0, 100, 108}, {0, 200, 208}, {8, 8, 8});
  const std::vector<size_t> three = {0, 1, 2};
  EXPECT_THAT(FindAdjacentRuns(tail, three, 16), ElementsAre(AdjacentRun{1, 3, 16}));
}

TEST(AdjacentRunsTest, ARepeatedSourceIsNoContinuation) {
  // The same source twice (a broadcast into consecutive destinations) is two copies.
  const std::vector<CopyRequest> r = Requests({0, 0}, {0, 16}, {16, 16});
  const std::vector<size_t> all = {0, 1};
  EXPECT_THAT(FindAdjacentRuns(r, all),
              ElementsAre(AdjacentRun{0, 1, 16}, AdjacentRun{1, 2, 16}));
}

}  // namespace
}  // namespace genesis::transfer
