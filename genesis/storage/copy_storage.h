// copy_storage and BatchStorage (F18, F19): the storage-level copies over
// genesis/transfer.
//
//   GENESIS_RETURN_IF_ERROR(CopyStorage(host, gpu));            // Returns when done.
//   GENESIS_ASSIGN_OR_RETURN(PendingCopy copy, CopyStorageAsync(host, gpu, stream));
//   ...                                                          // Other work.
//   GENESIS_RETURN_IF_ERROR(copy.Wait());                        // The copy's errors.
//
//   GENESIS_RETURN_IF_ERROR(BatchCopy(srcs, dsts));              // Many pairs, one batch.
//
// Bytes move through transfer::CopyBytes (pageable host memory through the staging
// pipeline) and transfer::BatchCopier (fused kernels, copy engines, peer copies); this
// file only turns storages into byte copies, and falls back to Storage::CopyFrom for
// views that are not contiguous.
#ifndef GENESIS_STORAGE_COPY_STORAGE_H_
#define GENESIS_STORAGE_COPY_STORAGE_H_

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "genesis/core/device.h"
#include "genesis/storage/storage.h"
#include "genesis/transfer/batch_plan.h"

struct CUstream_st;

namespace genesis::cuda {
class Event;
}

namespace genesis::storage {

// Copies `src`'s elements into `dst` (same shape and dtype; any devices) and returns
// when they are there: dst.CopyFrom(src), then a wait for dst's stream. Errors as for
// Storage::CopyFrom.
absl::Status CopyStorage(const Storage& src, Storage& dst);

// An asynchronous copy in flight: it holds both storages, so their memory stays
// alive until the copy has finished, whatever the caller drops.
class PendingCopy {
 public:
  // A finished copy (nothing to wait for).
  PendingCopy();
  // Waits for the copy if nobody did (ignoring its error), then lets the storages go.
  ~PendingCopy();
  PendingCopy(PendingCopy&&) noexcept;
  PendingCopy& operator=(PendingCopy&&) noexcept;

  // Blocks until the copy has finished; its first error (a CUDA error of the copy, or
  // of earlier work on its stream), or OK. Later calls return at once, with the same
  // result.
  absl::Status Wait();
  // True if the copy has finished (never blocks); its error, if it failed.
  absl::StatusOr<bool> Done() const;

 private:
  friend absl::StatusOr<PendingCopy> CopyStorageAsync(const Storage&, Storage&,
                                                      CUstream_st*);
  Storage src_;
  Storage dst_;
  std::unique_ptr<cuda::Event> done_;  // Null once finished.
  absl::Status result_;
};

// Starts copying `src`'s elements into `dst` on `stream` and returns without waiting
// for the copy. `stream` orders it: a stream of the GPU involved (of dst's GPU for a
// GPU-to-GPU copy; nullptr is that device's legacy default stream). The work already
// queued on src's and dst's own streams is waited for first if they are other streams.
// The copy is asynchronous when both views are contiguous, the dtypes are equal and a
// side is on a GPU; otherwise (host to host, strided views), and for pageable host
// memory of 1 MiB or more (staged), it is finished when this returns. `stream` must not
// be capturing a CUDA graph (transfer::BatchCopier::CopyAsync can be captured). Errors:
// those of Storage::CopyFrom; InvalidArgument for a stream of another device.
absl::StatusOr<PendingCopy> CopyStorageAsync(const Storage& src, Storage& dst,
                                             CUstream_st* stream);

// Copies srcs[i] into dsts[i] for every i as one batch (transfer::BatchCopier: many
// small copies in one fused kernel, large ones on the copy engines, directions on
// their own streams) and returns when every pair is done. Pairs whose views are not
// both contiguous are copied by Storage::CopyFrom after the batch. Every pair is
// checked before any byte moves. Errors: InvalidArgument when the lists' lengths
// differ (naming both); a pair that CopyFrom would refuse is refused as CopyFrom
// would, naming its index ("pair 3: ..."); the batch planner's errors (a destination
// overlapping another pair's) name it as "request 3 (cpu -> cuda:0, ...)".
absl::Status BatchCopy(absl::Span<const Storage> srcs, absl::Span<Storage> dsts);

// The plan BatchCopy would follow for the contiguous pairs (BatchPlan::ToString says
// why each group gets its mechanism); request i of the plan is pair i (an empty
// request for a pair copied by CopyFrom). Errors as for BatchCopy.
absl::StatusOr<transfer::BatchPlan> PlanBatchCopy(absl::Span<const Storage> srcs,
                                                  absl::Span<const Storage> dsts);

// The seed's BatchStorage: a list of storages that are moved together.
class BatchStorage {
 public:
  BatchStorage() = default;
  explicit BatchStorage(std::vector<Storage> storages) : storages_(std::move(storages)) {}

  size_t size() const { return storages_.size(); }
  const Storage& operator[](size_t i) const { return storages_[i]; }
  Storage& operator[](size_t i) { return storages_[i]; }
  const std::vector<Storage>& storages() const { return storages_; }
  void Add(Storage storage) { storages_.push_back(std::move(storage)); }

  // BatchCopy(src.storages(), storages()).
  absl::Status CopyFrom(const BatchStorage& src);
  // New contiguous storages on `device` (Empty with `options`) holding copies of these,
  // made in one batch.
  absl::StatusOr<BatchStorage> To(Device device, const StorageOptions& options = {}) const;

 private:
  std::vector<Storage> storages_;
};

}  // namespace genesis::storage

#endif  // GENESIS_STORAGE_COPY_STORAGE_H_
