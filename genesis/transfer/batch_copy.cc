#include "genesis/transfer/batch_copy.h"

#include <cstring>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "genesis/core/status.h"
#include "genesis/transfer/internal/batch_executor.h"

namespace genesis::transfer {

BatchCopier::BatchCopier(const BatchCopyOptions& options,
                         std::unique_ptr<internal::BatchExecutor> executor)
    : options_(options), executor_(std::move(executor)) {}

BatchCopier::~BatchCopier() = default;

absl::StatusOr<std::unique_ptr<BatchCopier>> BatchCopier::Create(
    const BatchCopyOptions& options) {
  if (options.staged_peer_chunk_bytes < 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch copier: staged_peer_chunk_bytes is ",
                     options.staged_peer_chunk_bytes, ", must be at least 4096"));
  }
  GENESIS_ASSIGN_OR_RETURN(std::unique_ptr<internal::BatchExecutor> executor,
                           internal::CreateBatchExecutor(options));
  return std::unique_ptr<BatchCopier>(new BatchCopier(options, std::move(executor)));
}

absl::StatusOr<BatchCopier*> BatchCopier::Default() {
  static const auto* const copier =
      new absl::StatusOr<std::unique_ptr<BatchCopier>>(Create());
  if (!copier->ok()) return copier->status();
  return copier->value().get();
}

const Topology& BatchCopier::topology() const { return executor_->topology(); }

absl::StatusOr<BatchPlan> BatchCopier::Plan(absl::Span<const CopyRequest> requests) const {
  return PlanBatch(requests, topology(), options_.plan);
}

absl::Status BatchCopier::Copy(absl::Span<const CopyRequest> requests, Device stream_device,
                               CUstream_st* stream) {
  GENESIS_ASSIGN_OR_RETURN(const BatchPlan plan, Plan(requests));
  return Execute(plan, requests, stream_device, stream, /*synchronize=*/true);
}

absl::Status BatchCopier::CopyAsync(absl::Span<const CopyRequest> requests,
                                    Device stream_device, CUstream_st* stream) {
  GENESIS_ASSIGN_OR_RETURN(const BatchPlan plan, Plan(requests));
  return Execute(plan, requests, stream_device, stream, /*synchronize=*/false);
}

absl::Status BatchCopier::Execute(const BatchPlan& plan,
                                  absl::Span<const CopyRequest> requests,
                                  Device stream_device, CUstream_st* stream,
                                  bool synchronize) {
  if (plan.group_of_request.size() != requests.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch copy: the plan is for ", plan.group_of_request.size(),
                     " requests, the batch has ", requests.size()));
  }
  GENESIS_RETURN_IF_ERROR(
      executor_->Run(plan, requests, stream_device, stream, synchronize));
  for (const CopyGroup& group : plan.groups) {
    if (group.mechanism != Mechanism::kHostMemcpy) continue;
    for (size_t i : group.requests) {
      std::memcpy(requests[i].dst, requests[i].src, requests[i].bytes);
    }
  }
  return absl::OkStatus();
}

absl::Status BatchCopier::EnablePeerAccess(int from, int to) {
  return executor_->EnablePeerAccess(from, to);
}

}  // namespace genesis::transfer
