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

// The `bytes` bytes at `offset` of the 1-D buffer `buffer`, as a view.
absl::StatusOr<Storage> Part(const Storage& buffer, size_t offset, size_t bytes) {
  const size_t item = ItemSize(buffer.dtype());
  return buffer.Slice(0, static_cast<int64_t>(offset / item),
                      static_cast<int64_t>((offset + bytes) / item));
}

absl::StatusOr<Work> RunBucketed(ProcessGroup& group, absl::Span<const Storage> storages,
                                 const BucketOptions& options, const Collective& collective) {
  GENESIS_ASSIGN_OR_RETURN(std::vector<Bucket> planned, PlanBuckets(storages, options));
  const std::vector<Bucket> buckets = JoinAdjacentInPlace(storages, std::move(planned));
  // One collective: the memory it reduces, and the packed buckets in it (unpacked after
  // it, each from its place in `flat`'s buffer).
  struct Pending {
    Storage flat;
    std::vector<const Bucket*> packed;
    std::vector<Storage> places;
    Work work;
    std::optional<cuda::Event> reduced;  // GPU, packed: recorded after the collective.
  };
  std::vector<Pending> pending;
  const bool on_gpu = group.device().is_cuda();
  // GPU: packed buckets live on the collective stream, are packed and unpacked on the
  // storages' stream, and reduced on the collective stream. The storages' stream waits
  // once for what the collective stream did before this call (earlier calls' buckets
  // may share memory with this call's), so a collective runs while the buckets of the
  // next are packed; a bucket is unpacked once its collective is done.
  CUstream_st* collective_stream = nullptr;
  absl::flat_hash_set<CUstream_st*> packing_streams;
  // Queues `p`'s collective (its `flat` and `packed` set), named by the storages from
  // `first` to `last` in its errors. GPU: the collectives run in the order they are
  // queued on every rank, also where they are queued on different streams (packed
  // buckets' on the collective stream, an in-place one's on its storages' stream): each
  // waits for the stream of the one before.
  bool first_collective = true;
  CUstream_st* last_collective_stream = nullptr;
  auto issue = [&](Pending p, size_t first, size_t last) -> absl::Status {
    if (on_gpu) {
      CUstream_st* stream = p.flat.stream();
      if (!first_collective && stream != last_collective_stream) {
        GENESIS_RETURN_IF_ERROR(
            internal::OrderStreams(last_collective_stream, stream, p.flat.device()));
      }
      first_collective = false;
      last_collective_stream = stream;
    }
    absl::StatusOr<Work> work = collective(p.flat);
    if (!work.ok()) {
      return absl::Status(work.status().code(), absl::StrCat("bucket of storages ", first, "..",
                                                             last, ": ", work.status().message()));
    }
    p.work = *std::move(work);
    if (on_gpu && !p.packed.empty()) {
      GENESIS_ASSIGN_OR_RETURN(p.reduced, cuda::Event::Create(p.flat.device().index()));
      GENESIS_RETURN_IF_ERROR(p.reduced->Record(collective_stream));
    }
    pending.push_back(std::move(p));
    return absl::OkStatus();
  };
  for (size_t i = 0; i < buckets.size();) {
    if (buckets[i].in_place) {
      Pending p;
      GENESIS_ASSIGN_OR_RETURN(p.flat, internal::BucketView(storages, buckets[i]));
      GENESIS_RETURN_IF_ERROR(
          issue(std::move(p), buckets[i].members.front(), buckets[i].members.back()));
      ++i;
      continue;
    }
    // Packed buckets of one dtype and device that follow each other: one buffer, each
    // bucket at a multiple of kPackAlignment, reduced by PackedCollectives's collectives.
    const DType dtype = buckets[i].dtype;
    const Device device = storages[buckets[i].members.front()].device();
    const auto joins = [&](const Bucket& b) {
      return !b.in_place && b.dtype == dtype && storages[b.members.front()].device() == device;
    };
    size_t end = i;
    std::vector<size_t> offsets;
    std::vector<size_t> sizes;
    size_t total = 0;
    for (; end < buckets.size() && joins(buckets[end]); ++end) {
      total = (total + kPackAlignment - 1) / kPackAlignment * kPackAlignment;
      offsets.push_back(total);
      sizes.push_back(buckets[end].bytes);
      total += buckets[end].bytes;
    }
    if (on_gpu) {
      GENESIS_ASSIGN_OR_RETURN(collective_stream, internal::CollectiveStream(device));
    }
    GENESIS_ASSIGN_OR_RETURN(Storage buffer, internal::PackBuffer(device, dtype, total));
    size_t k = i;
    for (size_t count : PackedCollectives(sizes)) {
      Pending p;
      const size_t first = k;
      absl::flat_hash_set<CUstream_st*> streams;  // The ones this collective waits for.
      for (; k < first + count; ++k) {
        const Bucket& bucket = buckets[k];
        CUstream_st* stream = storages[bucket.members.front()].stream();
        if (on_gpu && packing_streams.insert(stream).second) {
          GENESIS_RETURN_IF_ERROR(internal::OrderStreams(collective_stream, stream, device));
        }
        GENESIS_ASSIGN_OR_RETURN(Storage place, Part(buffer, offsets[k - i], bucket.bytes));
        GENESIS_RETURN_IF_ERROR(
            internal::MoveBucket(storages, bucket, place, /*pack=*/true, stream));
        streams.insert(stream);
        p.packed.push_back(&bucket);
        p.places.push_back(std::move(place));
      }
      if (on_gpu) {
        for (CUstream_st* stream : streams) {
          GENESIS_RETURN_IF_ERROR(internal::OrderStreams(stream, collective_stream, device));
        }
      }
      GENESIS_ASSIGN_OR_RETURN(p.flat,
                               Part(buffer, offsets[first - i],
                                    offsets[k - 1 - i] + sizes[k - 1 - i] - offsets[first - i]));
      GENESIS_RETURN_IF_ERROR(
          issue(std::move(p), buckets[first].members.front(), buckets[k - 1].members.back()));
    }
    i = end;
  }
  if (pending.empty()) return Work();
  absl::Status status;
  for (Pending& p : pending) {
    if (!on_gpu && !p.packed.empty()) status.Update(p.work.Wait());
    for (size_t j = 0; j < p.packed.size() && status.ok(); ++j) {
      CUstream_st* stream = storages[p.packed[j]->members.front()].stream();
      if (on_gpu) status.Update(cuda::WaitEvent(stream, *p.reduced));
      if (status.ok()) {
        status.Update(
            internal::MoveBucket(storages, *p.packed[j], p.places[j], /*pack=*/false, stream));
      }
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
