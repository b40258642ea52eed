// Planning a batch of byte copies: how each copy of the batch should be moved.
//
// A batch is many (src, dst, bytes) copies submitted together, any mix of sizes and of
// directions between the host and CUDA devices. Moving each with its own
// cudaMemcpyAsync wastes most of the time on launch overhead for small copies and
// leaves bandwidth unused for pageable host memory, so PlanBatch decides, without
// touching any memory or calling CUDA:
//
//  * groups: copies of one direction between the same devices (host to host; host to
//    device N; device N to host; within device N; peer from device A to device B),
//    split further by the mechanism chosen for them (and the rule that chose it);
//  * the mechanism per copy: a fused copy kernel, the copy engine, cudaMemcpyBatchAsync,
//    peer copies, staging through pinned host memory, host memcpy (see Mechanism);
//  * the stream per group, one per (device, lane) so that host-to-device,
//    device-to-host, local and peer traffic of a device can overlap.
//
//   GENESIS_ASSIGN_OR_RETURN(BatchPlan plan, PlanBatch(requests, topology));
//   LOG(INFO) << plan.ToString();   // One line per group, with the reason.
//
// PlanBatch is a pure function of its arguments. The thresholds in PlanOptions are
// starting points to be tuned by measurement, not measured optima.
#ifndef GENESIS_TRANSFER_BATCH_PLAN_H_
#define GENESIS_TRANSFER_BATCH_PLAN_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "genesis/core/device.h"
#include "genesis/transfer/staging.h"

namespace genesis::transfer {

// One copy of `bytes` from `src` on `src_device` to `dst` on `dst_device`. The pinned
// flags say whether host memory is page-locked (cudaHostAlloc or cudaHostRegister); they
// are ignored for a CUDA side. bytes == 0 is allowed with any pointers (it is planned
// as nothing).
struct CopyRequest {
  const void* src = nullptr;
  Device src_device;
  bool src_pinned = false;
  void* dst = nullptr;
  Device dst_device;
  bool dst_pinned = false;
  size_t bytes = 0;
};

// What the machine offers. Devices are cuda:0 .. cuda:(device_count - 1).
struct Topology {
  int device_count = 0;
  // peer_access[i][j]: device i can access device j's memory (cudaDeviceCanAccessPeer,
  // and access enabled). Either empty (no peer access anywhere) or device_count rows
  // of device_count entries. A copy between A and B has peer access when either
  // direction does: a peer kernel runs on a device that can reach the other one.
  std::vector<std::vector<bool>> peer_access;
  // cudaMemcpyBatchAsync exists (CUDA 12.8 and later).
  bool batch_memcpy_available = false;
};

// The thresholds that decide mechanisms. Sizes are per copy; counts are per group (one
// direction between the same devices).
struct PlanOptions {
  // A copy of at most this many bytes is small: a fused kernel can move it if its group
  // has enough of them and the kernel can reach both sides (device memory, or pinned
  // host memory, which a kernel reads and writes directly).
  size_t fused_max_bytes = size_t{256} << 10;
  // The same bound for copies within one device, where the kernel moves even large
  // copies as fast as the copy engine and far faster than one launch per copy.
  size_t fused_device_max_bytes = size_t{4} << 20;
  // Small copies are fused only when a group has at least this many; fewer are not
  // worth a kernel launch over individual copies.
  size_t fused_min_count = 8;
  // A copy of at least this many bytes is large: it goes to the copy engine (or peer
  // copy) on its own, where a launch costs little against its transfer time.
  size_t copy_engine_min_bytes = size_t{4} << 20;
  // Copies that are neither fused, large nor staged go to one cudaMemcpyBatchAsync when
  // it is available and the group has at least this many of them.
  size_t batch_min_count = 4;
  // A host-device copy whose host side is pageable and at least this large goes through
  // the staging pipeline (staging.h); smaller ones use the copy engine, which stages
  // pageable memory itself.
  size_t pageable_staging_min_bytes = kPageableStagingMinBytes;
  // A fused peer kernel runs on the source device, writing over the link, where the
  // source has access (the default); unset, it runs on the destination, reading the
  // source over the link, where the destination has access. Between two H100s over
  // NVLink, 1,024 x 64 KiB from scattered sources moved 365 GB/s pushing and 342
  // pulling, and from consecutive ones (one run for the copy engine) 388 and 357
  // (BM_Peer_1024x64KiB_* in batch_copy_cuda_benchmark). Pushing also keeps a batch
  // from the caller's device on the caller's stream, with no events between devices.
  bool peer_fused_kernel_pushes = true;
};

enum class Direction {
  kHostToHost,
  kHostToDevice,
  kDeviceToHost,
  kDeviceToDevice,  // Within one device.
  kPeer,            // Between two devices.
};

enum class Mechanism {
  kHostMemcpy,       // Host to host: memcpy.
  kFusedKernel,      // One kernel copies many small buffers (device, or pinned host).
  kCopyEngine,       // cudaMemcpyAsync per copy.
  kBatchMemcpy,      // One cudaMemcpyBatchAsync for the group's mid-size copies.
  kPeerCopy,         // cudaMemcpyPeerAsync per copy, with peer access.
  kPeerFusedKernel,  // One kernel copies many small buffers over peer access (runs
                     // adjacent on both sides of copy_engine_min_bytes or more go to
                     // the copy engine whole: adjacent_runs.h).
  kStagedPeer,       // No peer access: device to pinned host to device, double-buffered.
  kPageableStaging,  // Pageable host memory through the staging pipeline.
};

// The kinds of traffic of a device that get their own stream.
enum class Lane {
  kHostToDevice,
  kDeviceToHost,
  kDeviceToDevice,
  kPeer,  // One per (device, other device).
};

// Short lowercase names ("h2d", "fused_kernel", ...), used by ToString.
std::string_view DirectionName(Direction direction);
std::string_view MechanismName(Mechanism mechanism);
std::string_view LaneName(Lane lane);

// A stream of the plan: the lane of a device (and, for kPeer, the other device).
struct StreamAssignment {
  Device device;
  Lane lane = Lane::kHostToDevice;
  Device peer;  // kPeer only; otherwise the CPU.

  // "cuda:0/h2d", "cuda:1/peer:cuda:0".
  std::string ToString() const;
  friend bool operator==(const StreamAssignment&, const StreamAssignment&) = default;
};

// Copies of one direction between the same devices, moved by one mechanism for one
// reason.
struct CopyGroup {
  Direction direction = Direction::kHostToHost;
  Device src_device;
  Device dst_device;
  Mechanism mechanism = Mechanism::kHostMemcpy;
  std::vector<size_t> requests;  // Indices into the batch, ascending.
  size_t bytes = 0;              // Sum over `requests`.
  // Index into BatchPlan::streams; -1 for kHostMemcpy (no stream). For kStagedPeer
  // this is the source device's device-to-host stream and `second_stream` the
  // destination device's host-to-device stream; otherwise second_stream is -1.
  int stream = -1;
  int second_stream = -1;
  // Why this mechanism, naming the threshold that decided ("... <= fused_max_bytes
  // (256.0 KiB) ...").
  std::string reason;
};

struct BatchPlan {
  // Ordered by direction (as declared), source device (the CPU first), destination
  // device, then mechanism (as declared); a mechanism chosen for two reasons in one
  // direction (large copies and copies left unbatched both go to the copy engine) makes
  // two groups.
  std::vector<CopyGroup> groups;
  // Distinct streams, in order of first use by `groups`.
  std::vector<StreamAssignment> streams;
  // Per request of the batch: the index of its group, or -1 for bytes == 0.
  std::vector<int> group_of_request;
  size_t total_bytes = 0;

  // A table for people: a header line with the totals, one line per group with
  // direction, devices, mechanism, count, bytes, stream and reason, then the streams.
  std::string ToString() const;
};

// Plans `requests` on `topology` (see the file comment); every request with bytes > 0
// is in exactly one group. Errors, all InvalidArgument and naming the request's index
// in the batch and its device pair ("request 3 (cpu -> cuda:1, 4096 bytes): ..."):
// a null pointer with bytes > 0; a CUDA device index outside the topology; a range
// that wraps around the address space; source and destination overlapping on one
// device; a destination overlapping another request's destination or source on the
// same device (naming both requests); a total size above SIZE_MAX (possible only
// across devices). A malformed topology (negative device_count,
// peer_access not empty nor device_count x device_count) is InvalidArgument too.
absl::StatusOr<BatchPlan> PlanBatch(absl::Span<const CopyRequest> requests,
                                    const Topology& topology,
                                    const PlanOptions& options = {});

// One side of a copy, for MakeRequests.
struct SrcBuffer {
  const void* ptr = nullptr;
  Device device;
  bool pinned = false;
};
struct DstBuffer {
  void* ptr = nullptr;
  Device device;
  bool pinned = false;
};

// Zips three parallel lists into requests: request i copies sizes[i] bytes from
// srcs[i] to dsts[i]. InvalidArgument, naming the three lengths, unless they are all
// equal. Checks nothing else (PlanBatch does).
absl::StatusOr<std::vector<CopyRequest>> MakeRequests(absl::Span<const SrcBuffer> srcs,
                                                      absl::Span<const DstBuffer> dsts,
                                                      absl::Span<const size_t> sizes);

}  // namespace genesis::transfer

#endif  // GENESIS_TRANSFER_BATCH_PLAN_H_
