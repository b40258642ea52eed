// RunRanks: what each rank's outcome says, the deadline, and the grace after a rank fails.
#include "genesis/distributed/testing/multi_process.h"

#include <csignal>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace genesis::distributed::testing {
namespace {

TEST(RunRanksTest, EveryRankThatReturnsNothingIsOk) {
  std::vector<RankOutcome> outcomes =
      RunRanks(3, absl::Seconds(60), [](int) { return std::string(); });
  ASSERT_EQ(outcomes.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(outcomes[r].rank, r);
    EXPECT_TRUE(outcomes[r].ok()) << outcomes[r].Describe();
  }
}

// The others are killed once the grace after the first failure has passed, long before
// the deadline, and say which rank failed.
TEST(RunRanksTest, AFailedRankStopsTheOthersAfterTheGrace) {
  std::vector<RankOutcome> outcomes = RunRanks(
      3, absl::Minutes(10),
      [](int rank) {
        if (rank == 1) return std::string("boom");
        absl::SleepFor(absl::Minutes(10));
        return std::string();
      },
      /*failure_grace=*/absl::Milliseconds(100));
  ASSERT_EQ(outcomes.size(), 3u);
  EXPECT_EQ(outcomes[1].exit_code, 1);
  EXPECT_EQ(outcomes[1].message, "boom");
  EXPECT_FALSE(outcomes[1].ok());
  for (int r : {0, 2}) {
    EXPECT_TRUE(outcomes[r].stopped_after_failure) << outcomes[r].Describe();
    EXPECT_FALSE(outcomes[r].timed_out);
    EXPECT_EQ(outcomes[r].failed_first, 1);
    EXPECT_FALSE(outcomes[r].ok());
    EXPECT_TRUE(absl::StrContains(outcomes[r].Describe(), "after rank 1 failed"))
        << outcomes[r].Describe();
  }
}

// A rank that dies of a signal has failed too.
TEST(RunRanksTest, ARankKilledByASignalStopsTheOthers) {
  std::vector<RankOutcome> outcomes = RunRanks(
      2, absl::Minutes(10),
      [](int rank) {
        if (rank == 0) raise(SIGKILL);
        absl::SleepFor(absl::Minutes(10));
        return std::string();
      },
      /*failure_grace=*/absl::Milliseconds(100));
  EXPECT_EQ(outcomes[0].signal, SIGKILL);
  EXPECT_TRUE(absl::StrContains(outcomes[0].Describe(), "died of signal 9"));
  EXPECT_TRUE(outcomes[1].stopped_after_failure) << outcomes[1].Describe();
  EXPECT_EQ(outcomes[1].failed_first, 0);
}

// A rank that leaves early with success (a dead peer in the fault tests) stops nobody:
// the others run to their end.
TEST(RunRanksTest, ARankThatSucceedsEarlyStopsNobody) {
  std::vector<RankOutcome> outcomes = RunRanks(
      2, absl::Seconds(60),
      [](int rank) {
        if (rank == 1) absl::SleepFor(absl::Milliseconds(500));
        return std::string();
      },
      /*failure_grace=*/absl::Milliseconds(1));
  for (const RankOutcome& o : outcomes) EXPECT_TRUE(o.ok()) << o.Describe();
}

// A rank still running at the deadline is killed as hung, failure or not.
TEST(RunRanksTest, ARankPastTheDeadlineHung) {
  std::vector<RankOutcome> outcomes = RunRanks(1, absl::Milliseconds(200), [](int) {
    absl::SleepFor(absl::Minutes(10));
    return std::string();
  });
  EXPECT_TRUE(outcomes[0].timed_out);
  EXPECT_FALSE(outcomes[0].stopped_after_failure);
  EXPECT_FALSE(outcomes[0].ok());
  EXPECT_TRUE(absl::StrContains(outcomes[0].Describe(), "hung and was killed"));
}

}  // namespace
}  // namespace genesis::distributed::testing
