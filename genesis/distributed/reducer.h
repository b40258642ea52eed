// Gradient all_reduce that overlaps the backward pass, as PyTorch's DDP reducer does.
//
//   // Gradients in the order backward produces them (the reverse of the layers').
//   GENESIS_ASSIGN_OR_RETURN(std::unique_ptr<Reducer> reducer,
//                            Reducer::Create(*world, grads, ReduceOp::kAvg));
//   for (int step = 0; ...; ++step) {
//     for (size_t i = 0; i < grads.size(); ++i) {
//       ... queue the kernels that write grads[i] on its stream ...
//       GENESIS_RETURN_IF_ERROR(reducer->MarkReady(i));  // may start a bucket's all_reduce
//     }
//     GENESIS_ASSIGN_OR_RETURN(Work work, reducer->Finish());  // the step's last bucket
//     ... the optimizer, queued on the gradients' stream, sees every reduced gradient ...
//   }
//
// The gradients are planned into buckets once (bucket_plan.h: consecutive gradients up to
// bucket_bytes, in_place where they are views of one buffer, packed otherwise; a packed
// bucket's copies are planned once too, and only queued at each step). A
// bucket's all_reduce starts as soon as its last gradient is marked ready, provided
// every earlier bucket has started: buckets start in plan order on every rank, so the
// collectives match across ranks whatever order gradients come in.
//
// GPU groups: a bucket runs on a collective stream of the GPU (internal/bucket_memory.h),
// after the work queued on the gradients' stream when it started: packing (for packed
// buckets), the collective and unpacking, so the kernels that backward queues next run
// beside all of it. Finish makes the gradients' stream wait for every bucket; it returns
// without waiting, and the Work finishes with the last collective.
// Packed buckets keep one buffer each for the Reducer's life. CPU (Gloo) groups: a
// bucket's collective runs on the group's worker thread while the caller goes on;
// Finish returns once every bucket is reduced and unpacked.
//
// The plan must be the same on every rank: Create checks it with one collective and
// refuses a plan that differs. Bad input (a gradient marked twice in a step, an index
// out of range, Finish with gradients never marked) is refused naming the gradients;
// the step is then abandoned (Finish still waits for the collectives it had started, as
// they write the buckets and, in place, the gradients), and the next step starts
// afresh. Calls may come from any thread, one at a time or not.
#ifndef GENESIS_DISTRIBUTED_REDUCER_H_
#define GENESIS_DISTRIBUTED_REDUCER_H_

#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "genesis/cuda/event.h"
#include "genesis/distributed/bucket_plan.h"
#include "genesis/distributed/internal/bucket_memory.h"
#include "genesis/distributed/process_group.h"
#include "genesis/distributed/reduce_op.h"
#include "genesis/distributed/work.h"
#include "genesis/storage/storage.h"

namespace genesis::distributed {

class Reducer {
 public:
  // Plans the buckets of `grads` (in the order backward produces them) and checks with
  // one collective on `group` that every rank planned the same buckets.
  // InvalidArgument for no gradients, PlanBuckets's errors, a gradient on another
  // device than the group's, an op no backend reduces a bucket's dtype with
  // (CheckReduction); FailedPrecondition (saying how
  // this rank's plan looks) when the ranks' plans differ; the group's errors.
  // `group` must outlive the Reducer.
  // The default buckets are DDP's (25 MiB, the first 1 MiB, so that communication
  // starts early) with a tail tapered down to 1 MiB (halving from 25 MiB), so that what
  // is left to reduce after backward's last gradient is small.
  static absl::StatusOr<std::unique_ptr<Reducer>> Create(
      ProcessGroup& group, std::vector<storage::Storage> grads, ReduceOp op,
      const BucketOptions& options = {.first_bucket_bytes = size_t{1} << 20,
                                      .last_bucket_bytes = size_t{1} << 20});
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // Says that the work that writes gradient `index` is queued (GPU) or done (CPU), and
  // starts every bucket that is now complete and next in order. OutOfRange for an
  // index past the gradients; FailedPrecondition for a gradient already marked in
  // this step; the group's errors when a bucket fails to start (naming the bucket).
  absl::Status MarkReady(size_t index);

  // Ends the step: every bucket reduced into the gradients (GPU: queued on the
  // gradients' stream; CPU: done), and the next step begins. FailedPrecondition
  // naming the gradients never marked ready (nothing more is started, and the buckets
  // already started are waited for); the group's errors.
  absl::StatusOr<Work> Finish();

  // The plan, in order of the buckets' collectives.
  const std::vector<Bucket>& buckets() const { return buckets_; }
  // Buckets whose collective has started in this step.
  size_t started() const;

 private:
  Reducer(ProcessGroup& group, std::vector<storage::Storage> grads, ReduceOp op,
          std::vector<Bucket> buckets);
  // Allocates the buckets' buffers (packed) and views (in place).
  absl::Status Prepare();
  // Starts bucket `b`'s collective. Holding mu_.
  absl::Status StartLocked(size_t b);
  // Waits for the first `count` buckets' collectives (GPU: makes the gradients' stream
  // wait for them) and, with `unpack`, copies packed CPU buckets back into the
  // gradients. Returns the first error. Holding mu_.
  absl::Status AwaitLocked(size_t count, bool unpack);
  // Forgets the step's marks and started buckets. Holding mu_.
  void ResetLocked();

  ProcessGroup& group_;
  const std::vector<storage::Storage> grads_;
  const ReduceOp op_;
  const std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;    // The bucket of each gradient.
  std::vector<storage::Storage> comm_;  // What each bucket's collective runs on.
  std::vector<internal::PlannedMoves> moves_;  // Packed buckets' copies, planned once.
  CUstream_st* collective_stream_ = nullptr;  // GPU groups.

  mutable std::mutex mu_;
  // Under mu_: this step's state.
  std::vector<bool> marked_;
  std::vector<size_t> unmarked_in_bucket_;
  size_t next_ = 0;  // The next bucket to start.
  std::vector<Work> works_;
  std::vector<std::optional<cuda::Event>> reduced_;  // GPU: after each bucket's collective.
  std::vector<std::optional<cuda::Event>> ready_;    // GPU: each bucket's gradients written.
};

}  // namespace genesis::distributed

#endif  // GENESIS_DISTRIBUTED_REDUCER_H_
