// The memory side of gradient buckets (bucket_plan.h), shared by BucketedAllReduce
// (bucketed.h) and the Reducer (reducer.h): a bucket's memory as one storage, the
// buffer a packed bucket is reduced in, packing and unpacking with the batch copier,
// the stream packed buckets are reduced on, and ordering between streams.
#ifndef GENESIS_DISTRIBUTED_INTERNAL_BUCKET_MEMORY_H_
#define GENESIS_DISTRIBUTED_INTERNAL_BUCKET_MEMORY_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "genesis/core/device.h"
#include "genesis/distributed/bucket_plan.h"
#include "genesis/storage/storage.h"
#include "genesis/transfer/batch_plan.h"

struct CUstream_st;

namespace genesis::distributed::internal {

// The memory of an in-place bucket as one 1-D storage (a view; nothing is copied).
absl::StatusOr<storage::Storage> BucketView(absl::Span<const storage::Storage> storages,
                                            const Bucket& bucket);

// A new 1-D buffer of `bytes` (whole elements of `dtype`) for packed buckets on
// `device`; on a GPU it belongs to the collective stream (CollectiveStream).
absl::StatusOr<storage::Storage> PackBuffer(Device device, DType dtype, size_t bytes);

// PackBuffer for one packed bucket of `storages`, on the first member's device.
absl::StatusOr<storage::Storage> PackBuffer(absl::Span<const storage::Storage> storages,
                                            const Bucket& bucket);

// Copies every member of `bucket` into its place in `flat` (`pack`) or back out of
// it: at once on the CPU, queued on `stream` on a GPU.
absl::Status MoveBucket(absl::Span<const storage::Storage> storages, const Bucket& bucket,
                        const storage::Storage& flat, bool pack, CUstream_st* stream);

// A packed bucket's copies into its buffer and back out of it, planned once: what
// MoveBucket plans at every call, for callers that move the same bucket every step.
struct PlannedMoves {
  std::vector<transfer::CopyRequest> pack;
  std::vector<transfer::CopyRequest> unpack;
  transfer::BatchPlan pack_plan;
  transfer::BatchPlan unpack_plan;
};

// Plans `bucket`'s moves between `storages` and `flat`. The batch copier's errors.
absl::StatusOr<PlannedMoves> PlanMoves(absl::Span<const storage::Storage> storages,
                                       const Bucket& bucket, const storage::Storage& flat);

// Runs the planned packing (`pack`) or unpacking of `flat`'s bucket, as MoveBucket does.
absl::Status RunMoves(const PlannedMoves& moves, const storage::Storage& flat, bool pack,
                      CUstream_st* stream);

// The stream that packed buckets' collectives run on: one per GPU for the process, of
// the highest priority, so that a bucket's collective overlaps the work on the
// gradients' stream and is not queued behind it for multiprocessors.
absl::StatusOr<CUstream_st*> CollectiveStream(Device device);

// Makes work queued on `to` from now on wait for the work queued on `from` so far.
absl::Status OrderStreams(CUstream_st* from, CUstream_st* to, Device device);

}  // namespace genesis::distributed::internal

#endif  // GENESIS_DISTRIBUTED_INTERNAL_BUCKET_MEMORY_H_
