// ParallelFor: runs the parts of one piece of CPU work on several threads at once (the
// calling thread and the process's workers), for work that a caller has allowed to
// spread over cores, such as large strided copies.
//
//   ParallelFor(4, [&](int part) { CopyRows(part * rows / 4, (part + 1) * rows / 4); });
//
// The workers are created on first need, one per core at most, and live as long as the
// process. The calling thread runs parts too, and takes parts that no worker has taken
// yet, so a call never waits for a worker that is busy elsewhere: several threads may
// call at once, and a part may itself call ParallelFor. Locks are std::mutex, so that
// ThreadSanitizer follows every hand-off. A child process forked from a thread that is
// not inside ParallelFor starts without workers and makes its own when it needs them.
#ifndef GENESIS_CORE_PARALLEL_FOR_H_
#define GENESIS_CORE_PARALLEL_FOR_H_

#include "absl/functional/function_ref.h"

namespace genesis {

// The threads this machine can run at once (std::thread::hardware_concurrency, at
// least 1).
int HardwareThreads();

// Calls part(i) once for every i in [0, parts), on up to `parts` threads (the calling
// one among them), and returns once every call has returned; what the calls wrote is
// then visible to the caller. part(0) runs on the calling thread. `parts` <= 1 calls
// part(0) alone (none if `parts` is 0 or less). Calls must not throw.
void ParallelFor(int parts, absl::FunctionRef<void(int)> part);

}  // namespace genesis

#endif  // GENESIS_CORE_PARALLEL_FOR_H_
