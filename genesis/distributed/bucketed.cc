#include "genesis/distributed/bucketed.h"

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_set.h"
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
  for (size_t k = 0; k < bucket.members.size(); ++k) {
    const Storage& s = storages[bucket.members[k]];
    char* cursor = static_cast<char*>(flat.data_ptr()) + bucket.offsets[k];
    transfer::CopyRequest r;
    if (pack) {
      r = {s.data_ptr(), s.device(), s.is_pinned(), cursor, flat.device(), flat.is_pinned(),
           s.nbytes()};
    } else {
      r = {cursor, flat.device(), flat.is_pinned(), s.data_ptr(), s.device(), s.is_pinned(),
           s.nbytes()};
    }
    requests.push_back(r);
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
      GENESIS_ASSIGN_OR_RETURN(p.flat, Span1D(storages, bucket));
    } else {
      storage::StorageOptions flat_options;
      if (on_gpu) {
        GENESIS_ASSIGN_OR_RETURN(collective_stream, CollectiveStream(first.device()));
        flat_options.stream = collective_stream;
        if (packing_streams.insert(first.stream()).second) {
          GENESIS_RETURN_IF_ERROR(Order(collective_stream, first.stream(), first.device()));
        }
      }
      GENESIS_ASSIGN_OR_RETURN(
          p.flat, storage::Empty({static_cast<int64_t>(bucket.bytes / ItemSize(bucket.dtype))},
                                 bucket.dtype, first.device(), flat_options));
      GENESIS_RETURN_IF_ERROR(Move(storages, bucket, p.flat, /*pack=*/true, first.stream()));
      if (on_gpu) GENESIS_RETURN_IF_ERROR(Order(first.stream(), collective_stream, first.device()));
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
      status.Update(Move(storages, *p.bucket, p.flat, /*pack=*/false, first.stream()));
    }
  }
  // The buckets' memory goes back to the pool on the collective stream: later work
  // there comes after the unpacking.
  for (CUstream_st* s : packing_streams) {
    status.Update(Order(s, collective_stream, group.device()));
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
