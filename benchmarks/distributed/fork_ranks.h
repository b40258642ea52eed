// For the distributed benchmarks: when no launcher started this process (RANK is not
// set), forks one rank per GPU (or `nproc`) with torchrun's variables on the loopback,
// so that `collectives_benchmark --nproc=2` behaves as it would under torchrun; the
// main function that does so and runs a rank; the median they report.
#ifndef GENESIS_BENCHMARKS_DISTRIBUTED_FORK_RANKS_H_
#define GENESIS_BENCHMARKS_DISTRIBUTED_FORK_RANKS_H_

#include <optional>
#include <vector>

#include "absl/status/status.h"

namespace genesis::benchmarks {

// GPUs the NVIDIA driver lists (or CUDA_VISIBLE_DEVICES names), without initialising
// CUDA, so that ranks forked afterwards can still use it.
int VisibleGpus();

// In a process started by a launcher: nullopt at once. Otherwise forks `nproc` ranks
// (`nproc` <= 0: one per visible GPU, at least one; `gloo`: two) and returns nullopt
// in each child, which then runs its rank; the parent waits for all of them and
// returns 0 if every one exited 0, else 1. Call before CUDA is initialised.
std::optional<int> ForkRanksUnlessLaunched(int nproc, bool gloo);

// A benchmark's main, after its flags are parsed: NVLink multicast off (unless the
// environment says otherwise), the ranks forked unless launched (as above), and
// `run_rank` in each rank. Returns the process's exit status: the parent's (0 if every
// rank exited 0), or a rank's (1 after printing its error).
int RankMain(int nproc, bool gloo, absl::Status (*run_rank)());

// The median of `v` (the upper one of an even count); `v` must not be empty.
double Median(std::vector<double> v);

}  // namespace genesis::benchmarks

#endif  // GENESIS_BENCHMARKS_DISTRIBUTED_FORK_RANKS_H_
