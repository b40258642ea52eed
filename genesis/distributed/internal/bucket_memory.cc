#include "genesis/distributed/internal/bucket_memory.h"

#include <map>
#include <mutex>
#include <vector>

#include "genesis/core/status.h"
#include "genesis/cuda/event.h"
#include "genesis/cuda/stream.h"
#include "genesis/storage/layout.h"
#include "genesis/transfer/batch_copy.h"

namespace genesis::distributed::internal {

using storage::Storage;

absl::StatusOr<Storage> BucketView(absl::Span<const Storage> storages, const Bucket& bucket) {
  const Storage& first = storages[bucket.members.front()];
  GENESIS_ASSIGN_OR_RETURN(
      storage::Layout layout,
      storage::Layout::Contiguous({static_cast<int64_t>(bucket.bytes / ItemSize(bucket.dtype))},
                                  first.offset()));
  return first.View(layout);
}

absl::StatusOr<Storage> PackBuffer(Device device, DType dtype, size_t bytes) {
  storage::StorageOptions options;
  if (device.is_cuda()) {
    GENESIS_ASSIGN_OR_RETURN(options.stream, CollectiveStream(device));
  }
  return storage::Empty({static_cast<int64_t>(bytes / ItemSize(dtype))}, dtype, device, options);
}

absl::StatusOr<Storage> PackBuffer(absl::Span<const Storage> storages, const Bucket& bucket) {
  return PackBuffer(storages[bucket.members.front()].device(), bucket.dtype, bucket.bytes);
}

namespace {

// The copies of `bucket`'s members into `flat` (`pack`) or back out of it.
std::vector<transfer::CopyRequest> Requests(absl::Span<const Storage> storages,
                                            const Bucket& bucket, const Storage& flat,
                                            bool pack) {
  std::vector<transfer::CopyRequest> requests;
  requests.reserve(bucket.members.size());
  for (size_t k = 0; k < bucket.members.size(); ++k) {
    const Storage& s = storages[bucket.members[k]];
    char* cursor = static_cast<char*>(flat.data_ptr()) + bucket.offsets[k];
    if (pack) {
      requests.push_back({s.data_ptr(), s.device(), s.is_pinned(), cursor, flat.device(),
                          flat.is_pinned(), s.nbytes()});
    } else {
      requests.push_back({cursor, flat.device(), flat.is_pinned(), s.data_ptr(), s.device(),
                          s.is_pinned(), s.nbytes()});
    }
  }
  return requests;
}

}  // namespace

absl::Status MoveBucket(absl::Span<const Storage> storages, const Bucket& bucket,
                        const Storage& flat, bool pack, CUstream_st* stream) {
  GENESIS_ASSIGN_OR_RETURN(transfer::BatchCopier * copier, transfer::BatchCopier::Default());
  const std::vector<transfer::CopyRequest> requests = Requests(storages, bucket, flat, pack);
  if (flat.device().is_cpu()) return copier->Copy(requests);
  return copier->CopyAsync(requests, flat.device(), stream);
}

absl::StatusOr<PlannedMoves> PlanMoves(absl::Span<const Storage> storages,
                                       const Bucket& bucket, const Storage& flat) {
  GENESIS_ASSIGN_OR_RETURN(transfer::BatchCopier * copier, transfer::BatchCopier::Default());
  PlannedMoves moves;
  moves.pack = Requests(storages, bucket, flat, /*pack=*/true);
  moves.unpack = Requests(storages, bucket, flat, /*pack=*/false);
  GENESIS_ASSIGN_OR_RETURN(moves.pack_plan, copier->Plan(moves.pack));
  GENESIS_ASSIGN_OR_RETURN(moves.unpack_plan, copier->Plan(moves.unpack));
  return moves;
}

absl::Status RunMoves(const PlannedMoves& moves, const Storage& flat, bool pack,
                      CUstream_st* stream) {
  GENESIS_ASSIGN_OR_RETURN(transfer::BatchCopier * copier, transfer::BatchCopier::Default());
  const bool on_cpu = flat.device().is_cpu();
  return copier->Execute(pack ? moves.pack_plan : moves.unpack_plan,
                         pack ? moves.pack : moves.unpack,
                         on_cpu ? Device::Cpu() : flat.device(), on_cpu ? nullptr : stream,
                         /*synchronize=*/on_cpu);
}

absl::StatusOr<CUstream_st*> CollectiveStream(Device device) {
  static std::mutex mu;
  static auto* streams = new std::map<int, cuda::Stream>();  // Never destroyed.
  std::lock_guard<std::mutex> lock(mu);
  auto it = streams->find(device.index());
  if (it == streams->end()) {
    // The highest priority: when a collective and the compute queued beside it both
    // wait for multiprocessors, the collective's thread blocks are placed first.
    GENESIS_ASSIGN_OR_RETURN(const int priority, cuda::Stream::HighestPriority(device.index()));
    GENESIS_ASSIGN_OR_RETURN(cuda::Stream stream,
                             cuda::Stream::Create(device.index(), /*non_blocking=*/true, priority));
    it = streams->emplace(device.index(), std::move(stream)).first;
  }
  return it->second.native();
}

absl::Status OrderStreams(CUstream_st* from, CUstream_st* to, Device device) {
  GENESIS_ASSIGN_OR_RETURN(cuda::Event event, cuda::Event::Create(device.index()));
  GENESIS_RETURN_IF_ERROR(event.Record(from));
  // Destroying the event now is fine: CUDA releases it once the wait is done.
  return cuda::WaitEvent(to, event);
}

}  // namespace genesis::distributed::internal
