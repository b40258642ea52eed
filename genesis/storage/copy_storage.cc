#include "genesis/storage/copy_storage.h"

#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "genesis/core/status.h"
#include "genesis/cuda/event.h"
#include "genesis/transfer/batch_copy.h"
#include "genesis/transfer/copy.h"

namespace genesis::storage {
namespace {

absl::Status Annotated(size_t pair, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat("pair ", pair, ": ", status.message()));
}

// The byte copies of a batch: pair i is request i, empty when the pair's views are not
// both contiguous (CopyFrom copies it).
absl::StatusOr<std::vector<transfer::CopyRequest>> Requests(absl::Span<const Storage> srcs,
                                                            absl::Span<const Storage> dsts) {
  if (srcs.size() != dsts.size()) {
    return absl::InvalidArgumentError(absl::StrCat("BatchCopy: ", srcs.size(),
                                                   " sources and ", dsts.size(),
                                                   " destinations"));
  }
  std::vector<transfer::CopyRequest> requests(srcs.size());
  for (size_t i = 0; i < srcs.size(); ++i) {
    const Storage& src = srcs[i];
    const Storage& dst = dsts[i];
    if (absl::Status status = dst.CheckCopyFrom(src); !status.ok()) {
      return Annotated(i, status);
    }
    transfer::CopyRequest& r = requests[i];
    r.src_device = src.device();
    r.dst_device = dst.device();
    if (!src.is_contiguous() || !dst.is_contiguous()) continue;
    r.src = src.data_ptr();
    r.src_pinned = src.is_pinned();
    r.dst = dst.data_ptr();
    r.dst_pinned = dst.is_pinned();
    r.bytes = dst.nbytes();
  }
  return requests;
}

}  // namespace

absl::Status CopyStorage(const Storage& src, Storage& dst) {
  GENESIS_RETURN_IF_ERROR(dst.CopyFrom(src));
  return dst.Synchronize();
}

PendingCopy::PendingCopy() = default;
PendingCopy::PendingCopy(PendingCopy&&) noexcept = default;
PendingCopy& PendingCopy::operator=(PendingCopy&& other) noexcept {
  if (this != &other) {
    Wait().IgnoreError();
    src_ = std::move(other.src_);
    dst_ = std::move(other.dst_);
    done_ = std::move(other.done_);
    result_ = std::move(other.result_);
  }
  return *this;
}

PendingCopy::~PendingCopy() { Wait().IgnoreError(); }

absl::Status PendingCopy::Wait() {
  if (done_ == nullptr) return result_;
  result_ = done_->Synchronize();
  done_.reset();
  src_ = Storage();
  dst_ = Storage();
  return result_;
}

absl::StatusOr<bool> PendingCopy::Done() const {
  if (done_ == nullptr) {
    if (!result_.ok()) return result_;
    return true;
  }
  return done_->Query();
}

absl::StatusOr<PendingCopy> CopyStorageAsync(const Storage& src, Storage& dst,
                                             CUstream_st* stream) {
  GENESIS_RETURN_IF_ERROR(dst.CheckCopyFrom(src));
  PendingCopy pending;
  const bool gpu = src.device().is_cuda() || dst.device().is_cuda();
  if (!gpu || !src.is_contiguous() || !dst.is_contiguous() || dst.numel() == 0) {
    GENESIS_RETURN_IF_ERROR(CopyStorage(src, dst));
    return pending;
  }
  const Device device = dst.device().is_cuda() ? dst.device() : src.device();
  GENESIS_ASSIGN_OR_RETURN(cuda::Event event, cuda::Event::Create(device.index()));
  // Refuses a stream of another device before anything is queued.
  GENESIS_RETURN_IF_ERROR(event.Record(stream));
  for (const Storage* s : {&src, static_cast<const Storage*>(&dst)}) {
    if (s->device().is_cuda() && (s->device() != device || s->stream() != stream)) {
      GENESIS_RETURN_IF_ERROR(s->Synchronize());
    }
  }
  GENESIS_RETURN_IF_ERROR(transfer::CopyBytesAsync(dst.data_ptr(), dst.device(),
                                                   src.data_ptr(), src.device(),
                                                   dst.nbytes(), stream));
  GENESIS_RETURN_IF_ERROR(event.Record(stream));
  pending.src_ = src;
  pending.dst_ = dst;
  pending.done_ = std::make_unique<cuda::Event>(std::move(event));
  return pending;
}

absl::StatusOr<transfer::BatchPlan> PlanBatchCopy(absl::Span<const Storage> srcs,
                                                  absl::Span<const Storage> dsts) {
  GENESIS_ASSIGN_OR_RETURN(const std::vector<transfer::CopyRequest> requests,
                           Requests(srcs, dsts));
  GENESIS_ASSIGN_OR_RETURN(transfer::BatchCopier * copier, transfer::BatchCopier::Default());
  return copier->Plan(requests);
}

absl::Status BatchCopy(absl::Span<const Storage> srcs, absl::Span<Storage> dsts) {
  GENESIS_ASSIGN_OR_RETURN(const std::vector<transfer::CopyRequest> requests,
                           Requests(srcs, dsts));
  GENESIS_ASSIGN_OR_RETURN(transfer::BatchCopier * copier, transfer::BatchCopier::Default());
  GENESIS_ASSIGN_OR_RETURN(const transfer::BatchPlan plan, copier->Plan(requests));
  // The batch runs after the legacy default streams; wait for the storages' own.
  std::set<std::pair<int, CUstream_st*>> waited;
  for (absl::Span<const Storage> list : {srcs, absl::Span<const Storage>(dsts)}) {
    for (const Storage& s : list) {
      if (!s.device().is_cuda() || !waited.insert({s.device().index(), s.stream()}).second) {
        continue;
      }
      GENESIS_RETURN_IF_ERROR(s.Synchronize());
    }
  }
  GENESIS_RETURN_IF_ERROR(copier->Execute(plan, requests, Device::Cpu(), nullptr,
                                          /*synchronize=*/true));
  for (size_t i = 0; i < requests.size(); ++i) {
    if (requests[i].bytes > 0 || dsts[i].numel() == 0) continue;
    if (absl::Status status = CopyStorage(srcs[i], dsts[i]); !status.ok()) {
      return Annotated(i, status);
    }
  }
  return absl::OkStatus();
}

absl::Status BatchStorage::CopyFrom(const BatchStorage& src) {
  return BatchCopy(src.storages_, absl::MakeSpan(storages_));
}

absl::StatusOr<BatchStorage> BatchStorage::To(Device device,
                                              const StorageOptions& options) const {
  std::vector<Storage> out;
  out.reserve(storages_.size());
  for (const Storage& s : storages_) {
    GENESIS_ASSIGN_OR_RETURN(Storage copy, Empty(s.shape(), s.dtype(), device, options));
    out.push_back(std::move(copy));
  }
  GENESIS_RETURN_IF_ERROR(BatchCopy(storages_, absl::MakeSpan(out)));
  return BatchStorage(std::move(out));
}

}  // namespace genesis::storage
