#include "genesis/distributed/bucketed.h"

#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "genesis/core/status.h"
#include "genesis/storage/layout.h"
#include "genesis/transfer/batch_copy.h"

namespace genesis::distributed {

using storage::Storage;

namespace {

using Collective = std::function<absl::StatusOr<Work>(const Storage&)>;

// Copies between each member and its place in `flat`: into flat when `pack`.
absl::Status Move(absl::Span<const Storage> storages, const Bucket& bucket, const Storage& flat,
                  bool pack) {
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
  return copier->CopyAsync(requests, flat.device(), flat.stream());
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
  for (const Bucket& bucket : buckets) {
    const Storage& first = storages[bucket.members.front()];
    Storage flat;
    if (bucket.in_place) {
      GENESIS_ASSIGN_OR_RETURN(flat, Span1D(storages, bucket));
    } else {
      storage::StorageOptions flat_options;
      flat_options.stream = first.stream();
      GENESIS_ASSIGN_OR_RETURN(
          flat, storage::Empty({static_cast<int64_t>(bucket.bytes / ItemSize(bucket.dtype))},
                               bucket.dtype, first.device(), flat_options));
      GENESIS_RETURN_IF_ERROR(Move(storages, bucket, flat, /*pack=*/true));
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
  const bool on_cpu = group.device().is_cpu();
  absl::Status status;
  for (Pending& p : pending) {
    if (on_cpu) {
      status.Update(p.work.Wait());
      if (!status.ok()) continue;
    }
    if (!p.bucket->in_place) status.Update(Move(storages, *p.bucket, p.flat, /*pack=*/false));
  }
  GENESIS_RETURN_IF_ERROR(status);
  return on_cpu ? Work() : pending.back().work;
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
