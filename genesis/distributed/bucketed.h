// Collectives of many storages at once, bucket by bucket (bucket_plan.h): the
// gradients of data-parallel training.
//
//   std::vector<Storage> grads = ...;       // 1,000 gradients of 4 KiB to 4 MiB
//   GENESIS_ASSIGN_OR_RETURN(Work work, BucketedAllReduce(*world, grads, ReduceOp::kAvg));
//   GENESIS_RETURN_IF_ERROR(work.Wait());
//
// Storages of a bucket are packed into a buffer with the batch copier (the fused copy
// kernel on a GPU, memcpy on the CPU), reduced, and unpacked; a bucket that is already
// one buffer (gradients as views of a flat buffer) goes without copies, and such
// buckets that lie back to back go as one collective (one collective over memory
// already in place costs less than several). Packed buckets that follow each other lie
// one after another in one buffer, each packed as one batch, and are reduced by few
// collectives (bucket_plan.h's PackedCollectives): the first bucket and the last alone,
// those between them in collectives that grow from both ends, so that a collective runs
// while the buckets of the next are packed and those of the one before are unpacked.
//
// GPU groups: the call returns once everything is queued. Packing and unpacking run on
// the storages' stream (which waits for each bucket's collective before unpacking it),
// packed buckets' collectives on a collective stream of the GPU, so later work on the
// storages' stream sees every result; the Work finishes with the last collective. CPU
// groups: the call returns once every bucket is reduced and unpacked.
#ifndef GENESIS_DISTRIBUTED_BUCKETED_H_
#define GENESIS_DISTRIBUTED_BUCKETED_H_

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "genesis/distributed/bucket_plan.h"
#include "genesis/distributed/process_group.h"
#include "genesis/distributed/work.h"
#include "genesis/storage/storage.h"

namespace genesis::distributed {

// all_reduce of every storage. Errors: PlanBuckets's, and the group's (naming the
// bucket's first storage).
absl::StatusOr<Work> BucketedAllReduce(ProcessGroup& group,
                                       absl::Span<const storage::Storage> storages,
                                       ReduceOp op, const BucketOptions& options = {});

// broadcast of every storage from `root`.
absl::StatusOr<Work> BucketedBroadcast(ProcessGroup& group,
                                       absl::Span<const storage::Storage> storages, int root,
                                       const BucketOptions& options = {});

}  // namespace genesis::distributed

#endif  // GENESIS_DISTRIBUTED_BUCKETED_H_
