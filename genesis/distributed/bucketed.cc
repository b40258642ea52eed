#include "genesis/distributed/bucketed.h"

#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "genesis/core/status.h"
#include "genesis/cuda/event.h"
#include "genesis/cuda/stream.h"
#include "genesis/storage/layout.h"
#include "genesis/transfer/batch_copy.h"

namespace genesis::distributed {

using storage::Storage;

namespace {

using Collective = std::function<absl::StatusOr<Work>(const Storage&)>;

// Copies between each member and its place in `flat`: into flat when `pack`.
absl::Status Move(absl::Span<const Storage> storages, const Bucket& bucket, const Storage& flat,
                  bool pack, CUstream_st* stream) {
  GENESIS_ASSIGN_OR_RETURN(transfer::BatchCopier * copier, transfer::BatchCopier::Default());
  std::vector<transfer::CopyRequest> requests;
  requests.reserve(bucket.members.size());
  char* cursor = static_cast<char*>(flat.data_ptr());
  for (size_t index : bucket.members) {
    const Storage& s = storages[index];
    transfer::CopyRequest r;
    if (pack) {
      r = {s.data_ptr(), s.device(), s.is_pinned(), cursor, flat.device(), flat.is_pinned(),
           s.nbytes()};
    } else {
      r = {cursor, flat.device(), flat.is_pinned(), s.data_ptr(), s.device(), s.is_pinned(),
           s.nbytes()};
    }
    requests.push_back(r);
    cursor += s.nbytes();
  }
  if (flat.device().is_cpu()) return copier->Copy(requests);
  return copier->CopyAsync(requests, flat.device(), stream);
}

// The stream that packed buckets' collectives run on, one per GPU for the process, so
// that bucket k's collective overlaps the packing of bucket k + 1 on the storages'
// stream.
absl::StatusOr<CUstream_st*> CollectiveStream(Device device) {
  static std::mutex mu;
  static auto* streams = new std::map<int, cuda::Stream>();  // Never destroyed.
  std::lock_guard<std::mutex> lock(mu);
  auto it = streams->find(device.index());
  if (it == streams->end()) {
    GENESIS_ASSIGN_OR_RETURN(cuda::Stream stream, cuda::Stream::Create(device.index()));
    it = streams->emplace(device.index(), std::move(stream)).first;
  }
  return it->second.native();
}

// Makes work queued on `to` from now on wait for the work queued on `from` so far.
absl::Status Order(CUstream_st* from, CUstream_st* to, Device device) {
  GENESIS_ASSIGN_OR_RETURN(cuda::Event event, cuda::Event::Create(device.index()));
  GENESIS_RETURN_IF_ERROR(event.Record(from));
  // Destroying the event now is fine: CUDA releases it once the wait is done.
  return cuda::WaitEvent(to, event);
}

// The memory of an in-place bucket as one storage.
absl::StatusOr<Storage> Span1D(absl::Span<const Storage> storages, const Bucket& bucket) {
  const Storage& first = storages[bucket.members.front()];
  GENESIS_ASSIGN_OR_RETURN(
      storage::Layout layout,
      storage::Layout::Contiguous({static_cast<int64_t>(bucket.bytes / ItemSize(bucket.dtype))},
                                  first.offset()));
  return first.View(layout);
}

absl::StatusOr<Work> RunBucketed(ProcessGroup& group, absl::Span<const Storage> storages,
                                 const BucketOptions& options, const Collective& collective) {
  GENESIS_ASSIGN_OR_RETURN(std::vector<Bucket> buckets, PlanBuckets(storages, options));
  struct Pending {
    const Bucket* bucket;
    Storage flat;
    Work work;
  };
  std::vector<Pending> pending;
  pending.reserve(buckets.size());
  const bool on_gpu = group.device().is_cuda();
  for (const Bucket& bucket : buckets) {
    const Storage& first = storages[bucket.members.front()];
    Storage flat;
    if (bucket.in_place) {
      GENESIS_ASSIGN_OR_RETURN(flat, Span1D(storages, bucket));
    } else {
      // GPU: the bucket lives on the collective stream; packing runs on the storages'
      // stream once that stream is done with the memory, and the collective once the
      // packing is done.
      storage::StorageOptions flat_options;
      if (on_gpu) {
        GENESIS_ASSIGN_OR_RETURN(flat_options.stream, CollectiveStream(first.device()));
      }
      GENESIS_ASSIGN_OR_RETURN(
          flat, storage::Empty({static_cast<int64_t>(bucket.bytes / ItemSize(bucket.dtype))},
                               bucket.dtype, first.device(), flat_options));
      if (on_gpu) GENESIS_RETURN_IF_ERROR(Order(flat.stream(), first.stream(), first.device()));
      GENESIS_RETURN_IF_ERROR(Move(storages, bucket, flat, /*pack=*/true, first.stream()));
      if (on_gpu) GENESIS_RETURN_IF_ERROR(Order(first.stream(), flat.stream(), first.device()));
    }
    absl::StatusOr<Work> work = collective(flat);
    if (!work.ok()) {
      return absl::Status(work.status().code(),
                          absl::StrCat("bucket of storages ", bucket.members.front(), "..",
                                       bucket.members.back(), ": ", work.status().message()));
    }
    pending.push_back({&bucket, std::move(flat), *std::move(work)});
  }
  if (pending.empty()) return Work();
  absl::Status status;
  for (Pending& p : pending) {
    if (p.bucket->in_place) continue;
    const Storage& first = storages[p.bucket->members.front()];
    if (on_gpu) {
      status.Update(Order(p.flat.stream(), first.stream(), first.device()));
    } else {
      status.Update(p.work.Wait());
    }
    if (status.ok()) {
      status.Update(Move(storages, *p.bucket, p.flat, /*pack=*/false, first.stream()));
    }
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
