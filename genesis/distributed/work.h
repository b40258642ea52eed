// Work: the handle every operation of a process group returns.
//
// An operation is queued when the call returns (on the storage's CUDA stream for NCCL,
// on the group's worker thread for Gloo) and finishes later; its Work says whether it
// has finished (Done), blocks until it has (Wait) and tells how it ended (status).
//
//   GENESIS_ASSIGN_OR_RETURN(Work work, group->AllReduce(grad, ReduceOp::kAvg));
//   ...                                   // overlap other work
//   GENESIS_RETURN_IF_ERROR(work.Wait());  // grad holds the average
//
// GPU operations are ordered on the storage's stream, so later work on that stream sees
// the result without Wait; CPU operations must be waited for before the host reads or
// writes their storages. The storages an operation uses stay alive until it has
// finished, even if the caller drops them and the Work (no record_stream per call).
//
// An operation that cannot finish (a peer died, the ranks called different operations)
// ends with an error within the group's timeout; Wait never blocks longer than that.
// Copies of a Work share the same operation; Work is thread-safe.
#ifndef GENESIS_DISTRIBUTED_WORK_H_
#define GENESIS_DISTRIBUTED_WORK_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace genesis::distributed {

namespace internal {
class WorkState;
}

class Work {
 public:
  // A Work that has finished successfully (for operations with nothing to do).
  Work();
  // A Work that finishes when every one of `works` has, with the first error among them.
  static Work All(std::vector<Work> works);
  explicit Work(std::shared_ptr<internal::WorkState> state);

  // True once the operation has finished, successfully or not. Never blocks.
  bool Done() const;

  // Blocks until the operation has finished and returns how it ended: OK, or the error
  // naming the operation, the rank and the group. The group's timeout bounds the wait.
  absl::Status Wait() const;

  // Waits at most `timeout`: DeadlineExceeded (naming the operation) if the operation
  // is still running then; it goes on, and a later Wait may succeed.
  absl::Status Wait(absl::Duration timeout) const;

  // How the operation ended once Done(); Unavailable ("still running") before.
  absl::Status status() const;

  // What the operation is, e.g. "all_reduce of 1048576 x float32 (sum) in gloo group
  // 'world' (rank 0 of 4)".
  std::string description() const;

  // Keeps `object` alive until the operation has finished (drops it at once if it has):
  // how buffers stay valid while a collective uses them.
  void Retain(std::shared_ptr<const void> object) const;

 private:
  std::shared_ptr<internal::WorkState> state_;
};

// Waits for every work (all of them, even after an error) and returns the first error.
absl::Status WaitAll(absl::Span<const Work> works);

}  // namespace genesis::distributed

#endif  // GENESIS_DISTRIBUTED_WORK_H_
