#include "genesis/distributed/bucketed.h"

#include <functional>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "genesis/core/status.h"
#include "genesis/cuda/event.h"
#include "genesis/cuda/stream.h"
#include "genesis/distributed/internal/bucket_memory.h"

namespace genesis::distributed {

using storage::Storage;

namespace {

using Collective = std::function<absl::StatusOr<Work>(const Storage&)>;

// Joins in-place buckets that lie back to back in one buffer (of one dtype and
// stream) into one: their memory needs no packing, and one collective over it costs
// less than several (each pays NCCL's start and ramp).
std::vector<Bucket> JoinAdjacentInPlace(absl::Span<const Storage> storages,
                                        std::vector<Bucket> buckets) {
  std::vector<Bucket> joined;
  joined.reserve(buckets.size());
  for (Bucket& b : buckets) {
    if (!joined.empty() && b.in_place && joined.back().in_place &&
        joined.back().dtype == b.dtype) {
      Bucket& prev = joined.back();
      const Storage& prev_first = storages[prev.members.front()];
      const Storage& first = storages[b.members.front()];
      if (prev_first.SharesMemoryWith(first) && prev_first.stream() == first.stream() &&
          static_cast<const char*>(prev_first.data_ptr()) + prev.bytes ==
              static_cast<const char*>(first.data_ptr())) {
        for (size_t k = 0; k < b.members.size(); ++k) {
          prev.members.push_back(b.members[k]);
          prev.offsets.push_back(prev.bytes + b.offsets[k]);
        }
        prev.bytes += b.bytes;
        continue;
      }
    }
    joined.push_back(std::move(b));
  }
  return joined;
}

absl::StatusOr<Work> RunBucketed(ProcessGroup& group, absl::Span<const Storage> storages,
                                 const BucketOptions& options, const Collective& collective) {
  GENESIS_ASSIGN_OR_RETURN(std::vector<Bucket> planned, PlanBuckets(storages, options));
  const std::vector<Bucket> buckets = JoinAdjacentInPlace(storages, std::move(planned));
  struct Pending {
    const Bucket* bucket;
    Storage flat;
    Work work;
    std::optional<cuda::Event> reduced;  // GPU, packed: recorded after the collective.
  };
  std::vector<Pending> pending;
  pending.reserve(buckets.size());
  const bool on_gpu = group.device().is_cuda();
  // GPU: packed buckets live on the collective stream, are packed and unpacked on the
  // storages' stream, and reduced on the collective stream. The storages' stream waits
  // once for what the collective stream did before this call (earlier calls' buckets
  // may share memory with this call's), so bucket k's collective runs while bucket
  // k + 1 is packed; bucket k is unpacked once its own collective is done.
  CUstream_st* collective_stream = nullptr;
  absl::flat_hash_set<CUstream_st*> packing_streams;
  for (const Bucket& bucket : buckets) {
    const Storage& first = storages[bucket.members.front()];
    Pending p{&bucket, Storage(), Work(), std::nullopt};
    if (bucket.in_place) {
      GENESIS_ASSIGN_OR_RETURN(p.flat, internal::BucketView(storages, bucket));
    } else {
      if (on_gpu) {
        GENESIS_ASSIGN_OR_RETURN(collective_stream, internal::CollectiveStream(first.device()));
        if (packing_streams.insert(first.stream()).second) {
          GENESIS_RETURN_IF_ERROR(
              internal::OrderStreams(collective_stream, first.stream(), first.device()));
        }
      }
      GENESIS_ASSIGN_OR_RETURN(p.flat, internal::PackBuffer(storages, bucket));
      GENESIS_RETURN_IF_ERROR(
          internal::MoveBucket(storages, bucket, p.flat, /*pack=*/true, first.stream()));
      if (on_gpu) {
        GENESIS_RETURN_IF_ERROR(
            internal::OrderStreams(first.stream(), collective_stream, first.device()));
      }
    }
    absl::StatusOr<Work> work = collective(p.flat);
    if (!work.ok()) {
      return absl::Status(work.status().code(),
                          absl::StrCat("bucket of storages ", bucket.members.front(), "..",
                                       bucket.members.back(), ": ", work.status().message()));
    }
    p.work = *std::move(work);
    if (on_gpu && !bucket.in_place) {
      GENESIS_ASSIGN_OR_RETURN(p.reduced, cuda::Event::Create(first.device().index()));
      GENESIS_RETURN_IF_ERROR(p.reduced->Record(collective_stream));
    }
    pending.push_back(std::move(p));
  }
  if (pending.empty()) return Work();
  absl::Status status;
  for (Pending& p : pending) {
    if (p.bucket->in_place) continue;
    const Storage& first = storages[p.bucket->members.front()];
    if (on_gpu) {
      status.Update(cuda::WaitEvent(first.stream(), *p.reduced));
    } else {
      status.Update(p.work.Wait());
    }
    if (status.ok()) {
      status.Update(
          internal::MoveBucket(storages, *p.bucket, p.flat, /*pack=*/false, first.stream()));
    }
  }
  // The buckets' memory goes back to the pool on the collective stream: later work
  // there comes after the unpacking.
  for (CUstream_st* s : packing_streams) {
    status.Update(internal::OrderStreams(s, collective_stream, group.device()));
  }
  std::vector<Work> works;
  for (Pending& p : pending) works.push_back(p.work);
  if (!on_gpu) status.Update(WaitAll(works));  // In-place buckets too.
  GENESIS_RETURN_IF_ERROR(status);
  return on_gpu ? Work::All(std::move(works)) : Work();
}

}  // namespace

absl::StatusOr<Work> BucketedAllReduce(ProcessGroup& group, absl::Span<const Storage> storages,
                                       ReduceOp op, const BucketOptions& options) {
  return RunBucketed(group, storages, options,
                     [&](const Storage& flat) { return group.AllReduce(flat, op); });
}

absl::StatusOr<Work> BucketedBroadcast(ProcessGroup& group, absl::Span<const Storage> storages,
                                       int root, const BucketOptions& options) {
  return RunBucketed(group, storages, options,
                     [&](const Storage& flat) { return group.Broadcast(flat, root); });
}

}  // namespace genesis::distributed
