// The device side of a BatchCopier (batch_copy.h), one implementation per build:
// batch_executor_cuda.cc runs plans with the CUDA runtime, batch_executor_nocuda.cc has
// no device. Not part of the public API.
#ifndef GENESIS_TRANSFER_INTERNAL_BATCH_EXECUTOR_H_
#define GENESIS_TRANSFER_INTERNAL_BATCH_EXECUTOR_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "genesis/core/device.h"
#include "genesis/transfer/batch_copy.h"
#include "genesis/transfer/batch_plan.h"

struct CUstream_st;

namespace genesis::transfer::internal {

class BatchExecutor {
 public:
  virtual ~BatchExecutor() = default;

  virtual const Topology& topology() const = 0;

  // Checks that `stream` may order a batch for `stream_device` (BatchCopier::Copy's
  // rules), then queues (and with `synchronize`, waits for) every group of `plan`
  // except the kHostMemcpy ones, which the caller runs after this returns OK. Fails
  // before queueing anything for a bad stream, or when `stream` is capturing and the
  // plan needs the host.
  virtual absl::Status Run(const BatchPlan& plan, absl::Span<const CopyRequest> requests,
                           Device stream_device, CUstream_st* stream,
                           bool synchronize) = 0;

  virtual absl::Status EnablePeerAccess(int from, int to) = 0;
};

// The executor of this build.
absl::StatusOr<std::unique_ptr<BatchExecutor>> CreateBatchExecutor(
    const BatchCopyOptions& options);

}  // namespace genesis::transfer::internal

#endif  // GENESIS_TRANSFER_INTERNAL_BATCH_EXECUTOR_H_
