// Runs the ranks of a distributed test as child processes of the test, for tests of
// process groups on one machine (Gloo over the loopback, NCCL over local GPUs).
//
//   std::vector<RankOutcome> outcomes = RunRanks(4, absl::Seconds(60), [&](int rank) {
//     ... // make the group, run collectives; return "" or what went wrong
//   });
//   for (const RankOutcome& o : outcomes) EXPECT_TRUE(o.ok()) << o.Describe();
//
// Call it from a thread-free process (fork copies only the calling thread). A rank that
// has not ended by the deadline is killed, so a hang fails the test instead of stalling
// it. Once a rank has failed, the test has failed: the others get a short grace to end
// (and say what they saw) and are then killed, so that they do not wait out their
// group's timeout for the rank that is gone (minutes under a GPU sanitizer).
#ifndef GENESIS_DISTRIBUTED_TESTING_MULTI_PROCESS_H_
#define GENESIS_DISTRIBUTED_TESTING_MULTI_PROCESS_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace genesis::distributed::testing {

struct RankOutcome {
  int rank = 0;
  // Exit status of the child; -1 if it was killed by a signal.
  int exit_code = -1;
  int signal = 0;
  bool timed_out = false;
  // Killed `failure_grace` after rank `failed_first` failed (and before the deadline).
  bool stopped_after_failure = false;
  int failed_first = -1;
  // What the rank reported (its failure message), or its standard error's tail.
  std::string message;
  absl::Duration elapsed;

  bool ok() const { return exit_code == 0 && !timed_out && !stopped_after_failure; }
  std::string Describe() const;
};

// Runs `body(rank)` for rank 0..n-1, each in a forked child. A child exits 0 if body
// returns "", else it prints the text and exits 1. Returns when every child has ended,
// killing those still running at `timeout`, or `failure_grace` after the first child
// that exited non-zero or died of a signal (a rank that exits 0 early, as a dead peer
// does in the fault tests, stops nobody).
std::vector<RankOutcome> RunRanks(int n, absl::Duration timeout,
                                  const std::function<std::string(int rank)>& body,
                                  absl::Duration failure_grace = absl::Seconds(10));

// A fresh, empty directory under the test's temporary directory (TEST_TMPDIR).
std::string FreshDirectory(const std::string& name);

}  // namespace genesis::distributed::testing

#endif  // GENESIS_DISTRIBUTED_TESTING_MULTI_PROCESS_H_
