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

absl::StatusOr<Storage> PackBuffer(absl::Span<const Storage> storages, const Bucket& bucket) {
  const Storage& first = storages[bucket.members.front()];
  storage::StorageOptions options;
  if (first.device().is_cuda()) {
    GENESIS_ASSIGN_OR_RETURN(options.stream, CollectiveStream(first.device()));
  }
  return storage::Empty({static_cast<int64_t>(bucket.bytes / ItemSize(bucket.dtype))},
                        bucket.dtype, first.device(), options);
}

absl::Status MoveBucket(absl::Span<const Storage> storages, const Bucket& bucket,
                        const Storage& flat, bool pack, CUstream_st* stream) {
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

absl::Status OrderStreams(CUstream_st* from, CUstream_st* to, Device device) {
  GENESIS_ASSIGN_OR_RETURN(cuda::Event event, cuda::Event::Create(device.index()));
  GENESIS_RETURN_IF_ERROR(event.Record(from));
  // Destroying the event now is fine: CUDA releases it once the wait is done.
  return cuda::WaitEvent(to, event);
}

}  // namespace genesis::distributed::internal
