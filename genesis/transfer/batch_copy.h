// Executing batches of copies: the batch copier (F19) and GPU-to-GPU copies over peer
// access (F20).
//
// A BatchCopier runs a BatchPlan (batch_plan.h) for a list of CopyRequests, each group
// with its mechanism on a stream of its lane (one per device and kind of traffic, owned
// by the copier), so that host-to-device, device-to-host, local and peer traffic
// overlap:
//
//  * kFusedKernel, kPeerFusedKernel: one launch of the fused copy kernel
//    (kernels/fused_copy.h) per 1,024 copies, on the device that reaches both sides;
//  * kCopyEngine: cudaMemcpyAsync per copy; kBatchMemcpy: one cudaMemcpyBatchAsync;
//  * kPeerCopy: cudaMemcpyPeerAsync, with peer access enabled once per pair and cached;
//  * kStagedPeer: without peer access, each copy in chunks through two pinned host
//    buffers per device pair, the source's device-to-host stream filling one while the
//    destination's host-to-device stream drains the other;
//  * kPageableStaging: the device's shared staging pipeline (staging.h);
//  * kHostMemcpy: memcpy on the calling thread.
//
//   GENESIS_ASSIGN_OR_RETURN(BatchCopier* copier, BatchCopier::Default());
//   GENESIS_RETURN_IF_ERROR(copier->CopyAsync(requests, Device::Cuda(0), stream));
//
// Every batch is validated whole (PlanBatch's checks) before any byte moves.
#ifndef GENESIS_TRANSFER_BATCH_COPY_H_
#define GENESIS_TRANSFER_BATCH_COPY_H_

#include <cstddef>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "genesis/core/device.h"
#include "genesis/transfer/batch_plan.h"

struct CUstream_st;

namespace genesis::transfer {

namespace internal {
class BatchExecutor;
}

struct BatchCopyOptions {
  PlanOptions plan;
  // Plan as if no pair of devices had peer access, so that GPU-to-GPU copies take the
  // staged path (to test and to measure it).
  bool disable_peer_access = false;
  // Bytes of each of the two pinned buffers of a device pair's staged peer copies.
  // At least 4 KiB.
  size_t staged_peer_chunk_bytes = size_t{8} << 20;
};

class BatchCopier {
 public:
  // A copier for this machine. Its topology comes from the CUDA runtime: the device
  // count, cudaDeviceCanAccessPeer for every pair (empty when disable_peer_access), and
  // whether cudaMemcpyBatchAsync exists (runtime and driver 12.8 or later). Peer access
  // is enabled lazily, the first time a plan uses a pair. Without a GPU, or in the
  // CPU-only build, the topology has no device and only host-to-host copies run.
  // InvalidArgument for a staged_peer_chunk_bytes below 4 KiB.
  static absl::StatusOr<std::unique_ptr<BatchCopier>> Create(
      const BatchCopyOptions& options = {});

  // The process's copier with the default options, created at the first call (which
  // returns its error, as every later call does) and never destroyed.
  static absl::StatusOr<BatchCopier*> Default();

  // Waits for the copier's streams, then frees its streams, events and buffers.
  ~BatchCopier();

  BatchCopier(const BatchCopier&) = delete;
  BatchCopier& operator=(const BatchCopier&) = delete;

  const Topology& topology() const;
  const BatchCopyOptions& options() const { return options_; }

  // PlanBatch(requests, topology(), options().plan): what Copy would do, and why.
  absl::StatusOr<BatchPlan> Plan(absl::Span<const CopyRequest> requests) const;

  // Copies every request and returns once all bytes are at their destinations, or the
  // first error. The copies start after the work queued before the call on `stream`, a
  // stream of CUDA device `stream_device`; with stream_device the CPU (and `stream`
  // null), after the work queued on the legacy default stream of every device in the
  // batch. Errors: PlanBatch's, which name the request; InvalidArgument for a stream
  // of another device than `stream_device`, or a stream with a CPU stream_device;
  // OutOfRange for a stream_device that does not exist; the first CUDA error. After an
  // error the destinations hold an unspecified mix of old and new bytes, and no copy
  // of the batch is still running.
  absl::Status Copy(absl::Span<const CopyRequest> requests,
                    Device stream_device = Device::Cpu(), CUstream_st* stream = nullptr);

  // Queues the batch and returns: the copies start after the work queued before the
  // call on `stream` (as for Copy), and the work queued on it afterwards (on every
  // device's legacy default stream, for a CPU stream_device) runs after all of them.
  // The caller keeps the buffers alive and the sources unchanged until then. Copies
  // the host drives finish before the return: host to host, and pageable host memory
  // through the staging pipeline (which first waits for the work before the call).
  // While `stream` captures a CUDA graph the device copies are captured, not run;
  // batch memcpy is then replaced by copy-engine copies, a batch that needs the host
  // (host to host, pageable staging) is FailedPrecondition, and the stream is taken to
  // be of `stream_device` (CUDA cannot say whose a capturing stream is). Errors as for Copy;
  // an error of a copy itself may surface only when `stream` is synchronised.
  absl::Status CopyAsync(absl::Span<const CopyRequest> requests, Device stream_device,
                         CUstream_st* stream);

  // Copy or CopyAsync (as `synchronize` says) with `plan`, which must be Plan's for
  // these `requests` (InvalidArgument if its request count differs).
  absl::Status Execute(const BatchPlan& plan, absl::Span<const CopyRequest> requests,
                       Device stream_device, CUstream_st* stream, bool synchronize);

  // Enables access from device `from` to the memory of device `to`
  // (cudaDeviceEnablePeerAccess) the first time, and returns the first attempt's result
  // on every later call. OutOfRange for a device that does not exist;
  // FailedPrecondition if the topology has no access from `from` to `to`.
  absl::Status EnablePeerAccess(int from, int to);

 private:
  BatchCopier(const BatchCopyOptions& options,
              std::unique_ptr<internal::BatchExecutor> executor);

  const BatchCopyOptions options_;
  const std::unique_ptr<internal::BatchExecutor> executor_;
};

}  // namespace genesis::transfer

#endif  // GENESIS_TRANSFER_BATCH_COPY_H_
