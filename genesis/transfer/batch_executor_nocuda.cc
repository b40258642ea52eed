// CPU-only build of internal/batch_executor.h: no device, so plans hold only
// host-to-host groups (PlanBatch rejects CUDA devices against an empty topology).
#include "absl/strings/str_cat.h"
#include "genesis/transfer/internal/batch_executor.h"

namespace genesis::transfer::internal {
namespace {

absl::Status NoCuda(Device device) {
  return absl::FailedPreconditionError(absl::StrCat(
      "genesis was built without CUDA support (CPU-only build): no ", device.ToString()));
}

class HostOnlyExecutor : public BatchExecutor {
 public:
  const Topology& topology() const override { return topology_; }

  absl::Status Run(const BatchPlan& plan, absl::Span<const CopyRequest> requests,
                   Device stream_device, CUstream_st* stream, bool synchronize) override {
    if (stream_device.is_cuda()) return NoCuda(stream_device);
    if (stream != nullptr) {
      return absl::InvalidArgumentError(
          "batch copy: a stream was given with the CPU as its device");
    }
    for (const CopyGroup& group : plan.groups) {
      if (group.mechanism != Mechanism::kHostMemcpy) {
        return NoCuda(group.src_device.is_cuda() ? group.src_device : group.dst_device);
      }
    }
    return absl::OkStatus();
  }

  absl::Status EnablePeerAccess(int from, int to) override {
    return NoCuda(Device::Cuda(from));
  }

 private:
  Topology topology_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<BatchExecutor>> CreateBatchExecutor(
    const BatchCopyOptions& options) {
  return std::make_unique<HostOnlyExecutor>();
}

}  // namespace genesis::transfer::internal
