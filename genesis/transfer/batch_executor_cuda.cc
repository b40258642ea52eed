// CUDA build of internal/batch_executor.h: runs batch plans with the CUDA runtime.
//
// Ordering. A plan with a single lane on the caller's device runs on the caller's
// stream. Otherwise a batch starts with an "entry" event recorded on each ordering
// stream (the caller's stream, or every device's legacy default stream); every lane
// stream the plan uses waits for all of them. After the groups are queued, an "exit"
// event is recorded on each lane stream and every ordering stream waits for all of
// those (Copy also waits on the host). Events come from a per-device free list; an
// event can go back to it as soon as the waits on it are queued, since a wait captures
// the record before it. The same joins make the whole batch part of a graph when the
// caller's stream captures. docs/batch_copy.md says more.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "genesis/core/absl_compat.h"
#include "genesis/core/status.h"
#include "genesis/cuda/device_guard.h"
#include "genesis/cuda/device_query.h"
#include "genesis/cuda/internal/check.h"
#include "genesis/cuda/peer_access.h"
#include "genesis/cuda/sanitizer_marks.h"
#include "genesis/transfer/adjacent_runs.h"
#include "genesis/transfer/cuda_staging_engine.h"
#include "genesis/transfer/internal/batch_executor.h"
#include "genesis/transfer/kernels/fused_copy.h"

namespace genesis::transfer::internal {
namespace {

using cuda::DeviceGuard;

// The copies `indices` of `requests` in fused kernels on `lane`: encoded straight from
// the requests into a parameter buffer the thread's later calls reuse (no allocation
// per call), one launch per 1,024 copies.
absl::Status LaunchFused(absl::Span<const size_t> indices,
                         absl::Span<const CopyRequest> requests, cudaStream_t lane) {
  return kernels::LaunchFusedCopy(
      indices.size(), [&](size_t k) -> const CopyRequest& { return requests[indices[k]]; },
      lane);
}

// Two pinned buffers and their events for staged copies from one device to another.
struct StagedPair {
  std::mutex mu;  // Held while a group's copies are queued.
  void* buffer[2] = {nullptr, nullptr};
  cudaEvent_t filled[2] = {nullptr, nullptr};   // On the source device.
  cudaEvent_t drained[2] = {nullptr, nullptr};  // On the destination device.
  bool drain_recorded[2] = {false, false};
  int next = 0;
};

// Waits for and frees what `pair` holds (staged copies from `src` to `dst`).
void DestroyStagedPair(int src, int dst, StagedPair& pair) {
  for (int i = 0; i < 2; ++i) {
    {
      cuda::internal::BestEffortDeviceSwitch use(src);
      if (pair.filled[i] != nullptr) cuda::IgnoreCudaError(cudaEventDestroy(pair.filled[i]));
    }
    cuda::internal::BestEffortDeviceSwitch use(dst);
    if (pair.drained[i] != nullptr) {
      cuda::IgnoreCudaError(cudaEventSynchronize(pair.drained[i]));
      cuda::IgnoreCudaError(cudaEventDestroy(pair.drained[i]));
    }
    if (pair.buffer[i] != nullptr) cuda::IgnoreCudaError(cudaFreeHost(pair.buffer[i]));
  }
}

class CudaExecutor : public BatchExecutor {
 public:
  CudaExecutor(const BatchCopyOptions& options, Topology topology,
               std::vector<bool> host_pointer_usable)
      : options_(options),
        topology_(std::move(topology)),
        host_pointer_usable_(std::move(host_pointer_usable)) {}
  ~CudaExecutor() override;

  const Topology& topology() const override { return topology_; }
  // OK (and whether `stream` is capturing a graph) if `stream` may order a batch for
  // `stream_device`.
  absl::StatusOr<bool> CheckStream(Device stream_device, CUstream_st* stream);
  absl::Status Run(const BatchPlan& plan, absl::Span<const CopyRequest> requests,
                   Device stream_device, CUstream_st* stream, bool synchronize) override;
  absl::Status EnablePeerAccess(int from, int to) override;

 private:
  struct OrderingStream {
    int device;
    cudaStream_t stream;
  };

  absl::StatusOr<cudaStream_t> LaneStream(const StreamAssignment& lane);
  absl::StatusOr<cudaEvent_t> AcquireEvent(int device);
  // Events a call holds, with their devices.
  using EventList = absl::InlinedVector<std::pair<int, cudaEvent_t>, 12>;
  void ReleaseEvents(EventList& events);
  absl::StatusOr<StagedPair*> StagedPairFor(int src, int dst);

  absl::Status RunGroup(const CopyGroup& group, absl::Span<const CopyRequest> requests,
                        absl::Span<const cudaStream_t> lanes,
                        const std::vector<StreamAssignment>& assignments, bool capturing);
  absl::Status RunStagedPeer(const CopyGroup& group, absl::Span<const CopyRequest> requests,
                             cudaStream_t src_lane, cudaStream_t dst_lane);
  // A kPeerFusedKernel group on `device`'s `lane`: runs of copies that continue one
  // another on both sides and reach copy_engine_min_bytes together go to the copy
  // engine, one cudaMemcpyPeerAsync each (adjacent_runs.h says why); the rest are fused.
  absl::Status RunPeerFused(const CopyGroup& group, absl::Span<const CopyRequest> requests,
                            cudaStream_t lane, int device);
  absl::Status RunPageable(const CopyGroup& group, absl::Span<const CopyRequest> requests);

  const BatchCopyOptions options_;
  const Topology topology_;
  // Per device: cudaDevAttrCanUseHostPointerForRegisteredMem, so a kernel may use a
  // pinned host pointer as it is.
  const std::vector<bool> host_pointer_usable_;

  std::mutex mu_;  // Guards the maps below.
  std::map<std::tuple<int, int, int>, cudaStream_t> lanes_;
  std::map<int, std::vector<cudaEvent_t>> free_events_;
  std::vector<std::pair<int, cudaEvent_t>> all_events_;
  std::map<std::pair<int, int>, std::unique_ptr<StagedPair>> staged_pairs_;
};

CudaExecutor::~CudaExecutor() {
  for (const auto& [key, stream] : lanes_) {
    cuda::internal::BestEffortDeviceSwitch use(std::get<0>(key));
    cuda::IgnoreCudaError(cudaStreamSynchronize(stream));
    cuda::IgnoreCudaError(cudaStreamDestroy(stream));
  }
  for (const auto& [device, event] : all_events_) {
    cuda::internal::BestEffortDeviceSwitch use(device);
    cuda::IgnoreCudaError(cudaEventDestroy(event));
  }
  for (const auto& [key, pair] : staged_pairs_) {
    DestroyStagedPair(key.first, key.second, *pair);
  }
}

absl::StatusOr<bool> CudaExecutor::CheckStream(Device stream_device, CUstream_st* stream) {
  if (stream_device.is_cpu()) {
    if (stream != nullptr) {
      return absl::InvalidArgumentError(
          "batch copy: a stream was given with the CPU as its device");
    }
    return false;
  }
  GENESIS_RETURN_IF_ERROR(cuda::CheckDeviceIndex(stream_device.index()));
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  GENESIS_CUDA_RETURN_IF_ERROR_ON(stream_device.index(),
                                  cudaStreamIsCapturing(stream, &capture));
  // nullptr is the device's legacy default stream. cudaStreamGetDevice is refused (and
  // breaks the capture) while a stream captures: a capturing stream is taken to be of
  // `stream_device`.
  if (stream == nullptr || capture != cudaStreamCaptureStatusNone) {
    return capture != cudaStreamCaptureStatusNone;
  }
  int device = -1;
  GENESIS_CUDA_RETURN_IF_ERROR(cudaStreamGetDevice(stream, &device));
  if (device != stream_device.index()) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch copy: the stream belongs to cuda:", device, ", not to ",
                     stream_device.ToString()));
  }
  return false;
}

absl::StatusOr<cudaStream_t> CudaExecutor::LaneStream(const StreamAssignment& lane) {
  const auto key = std::make_tuple(lane.device.index(), static_cast<int>(lane.lane),
                                   lane.peer.is_cuda() ? lane.peer.index() : -1);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = lanes_.find(key);
  if (it != lanes_.end()) return it->second;
  GENESIS_ASSIGN_OR_RETURN(DeviceGuard guard, DeviceGuard::Create(lane.device.index()));
  cudaStream_t stream = nullptr;
  GENESIS_CUDA_RETURN_IF_ERROR_ON(lane.device.index(),
                                  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  lanes_.emplace(key, stream);
  return stream;
}

absl::StatusOr<cudaEvent_t> CudaExecutor::AcquireEvent(int device) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<cudaEvent_t>& free = free_events_[device];
    if (!free.empty()) {
      cudaEvent_t event = free.back();
      free.pop_back();
      return event;
    }
  }
  GENESIS_ASSIGN_OR_RETURN(DeviceGuard guard, DeviceGuard::Create(device));
  cudaEvent_t event = nullptr;
  GENESIS_CUDA_RETURN_IF_ERROR_ON(device,
                                  cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  std::lock_guard<std::mutex> lock(mu_);
  all_events_.emplace_back(device, event);
  return event;
}

void CudaExecutor::ReleaseEvents(EventList& events) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [device, event] : events) free_events_[device].push_back(event);
  events.clear();
}

absl::Status CudaExecutor::EnablePeerAccess(int from, int to) {
  GENESIS_RETURN_IF_ERROR(cuda::CheckDeviceIndex(from));
  GENESIS_RETURN_IF_ERROR(cuda::CheckDeviceIndex(to));
  if (topology_.peer_access.empty() || !topology_.peer_access[from][to] || from == to) {
    return absl::FailedPreconditionError(
        absl::StrCat("cuda:", from, " has no peer access to cuda:", to));
  }
  // Once per pair in the process; memory that needs its own grant (expandable
  // segments) is opened to `from` there too.
  return cuda::EnablePeerAccess(from, to);
}

absl::StatusOr<StagedPair*> CudaExecutor::StagedPairFor(int src, int dst) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = staged_pairs_.find({src, dst});
  if (it != staged_pairs_.end()) return it->second.get();
  auto pair = std::make_unique<StagedPair>();
  const absl::Status status = [&]() -> absl::Status {
    for (int i = 0; i < 2; ++i) {
      {
        GENESIS_ASSIGN_OR_RETURN(DeviceGuard guard, DeviceGuard::Create(src));
        GENESIS_CUDA_RETURN_IF_ERROR_ON(
            src, cudaEventCreateWithFlags(&pair->filled[i], cudaEventDisableTiming));
      }
      GENESIS_ASSIGN_OR_RETURN(DeviceGuard guard, DeviceGuard::Create(dst));
      GENESIS_CUDA_RETURN_IF_ERROR_ON(
          dst, cudaEventCreateWithFlags(&pair->drained[i], cudaEventDisableTiming));
      GENESIS_CUDA_RETURN_IF_ERROR_ON(
          dst, cudaHostAlloc(&pair->buffer[i], options_.staged_peer_chunk_bytes,
                             cudaHostAllocPortable));
    }
    return absl::OkStatus();
  }();
  if (!status.ok()) {
    DestroyStagedPair(src, dst, *pair);
    return status;
  }
  return staged_pairs_.emplace(std::make_pair(src, dst), std::move(pair))
      .first->second.get();
}

bool NeedsHost(Mechanism mechanism) {
  return mechanism == Mechanism::kHostMemcpy || mechanism == Mechanism::kPageableStaging;
}

absl::Status CudaExecutor::Run(const BatchPlan& plan, absl::Span<const CopyRequest> requests,
                               Device stream_device, CUstream_st* stream,
                               bool synchronize) {
  GENESIS_ASSIGN_OR_RETURN(const bool capturing, CheckStream(stream_device, stream));
  if (plan.streams.empty()) return absl::OkStatus();  // Host to host only.
  if (capturing) {
    if (synchronize) {
      return absl::FailedPreconditionError(
          "batch copy: Copy waits for its copies, which a capturing stream does not run; "
          "use CopyAsync");
    }
    for (const CopyGroup& group : plan.groups) {
      if (NeedsHost(group.mechanism)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "batch copy: the stream is capturing a CUDA graph, and a group (",
            ToAbsl(DirectionName(group.direction)), ", ",
            ToAbsl(MechanismName(group.mechanism)), ") needs the host"));
      }
    }
  }

  // A plan with one lane on the caller's device runs on the caller's stream itself:
  // no events, no hop between streams (a few microseconds of a small batch). Not with
  // the legacy default stream when cudaMemcpyBatchAsync would run (it refuses that
  // stream), nor with pageable staging (which waits on the host).
  const bool direct =
      stream_device.is_cuda() && plan.streams.size() == 1 &&
      plan.streams[0].device == stream_device &&
      std::none_of(plan.groups.begin(), plan.groups.end(), [&](const CopyGroup& g) {
        return g.mechanism == Mechanism::kPageableStaging ||
               (g.mechanism == Mechanism::kBatchMemcpy && stream == nullptr);
      });
  if (direct) {
    const cudaStream_t lanes[] = {stream};
    absl::Status first_error;
    for (const CopyGroup& group : plan.groups) {
      if (group.mechanism == Mechanism::kHostMemcpy || !first_error.ok()) continue;
      first_error = RunGroup(group, requests, lanes, plan.streams, capturing);
    }
    if (!synchronize) return first_error;
    // Also after an error: Copy returns only when nothing it queued still runs.
    GENESIS_ASSIGN_OR_RETURN(DeviceGuard guard, DeviceGuard::Create(stream_device.index()));
    const absl::Status synchronized = cuda::CudaStatus(
        cudaStreamSynchronize(stream), "cudaStreamSynchronize", stream_device.index());
    return first_error.ok() ? synchronized : first_error;
  }

  // The ordering streams, and the lanes.
  // No allocation per call: a plan has a few streams.
  absl::InlinedVector<OrderingStream, 4> ordering;
  if (stream_device.is_cuda()) {
    ordering.push_back({stream_device.index(), stream});
  } else {
    for (const StreamAssignment& s : plan.streams) {
      const int d = s.device.index();
      if (std::none_of(ordering.begin(), ordering.end(),
                       [d](const OrderingStream& o) { return o.device == d; })) {
        ordering.push_back({d, nullptr});
      }
    }
  }
  absl::InlinedVector<cudaStream_t, 8> lanes;
  for (const StreamAssignment& s : plan.streams) {
    GENESIS_ASSIGN_OR_RETURN(cudaStream_t lane, LaneStream(s));
    lanes.push_back(lane);
  }

  EventList events;  // Released at the end.
  struct Release {
    CudaExecutor* self;
    EventList& events;
    ~Release() { self->ReleaseEvents(events); }
  } release{this, events};

  // Entry: every lane waits for every ordering stream's work so far.
  absl::InlinedVector<cudaEvent_t, 4> entries;
  for (const OrderingStream& o : ordering) {
    GENESIS_ASSIGN_OR_RETURN(cudaEvent_t event, AcquireEvent(o.device));
    events.emplace_back(o.device, event);
    GENESIS_ASSIGN_OR_RETURN(DeviceGuard guard, DeviceGuard::Create(o.device));
    GENESIS_CUDA_RETURN_IF_ERROR_ON(o.device, cudaEventRecord(event, o.stream));
    entries.push_back(event);
  }
  for (size_t i = 0; i < lanes.size(); ++i) {
    for (cudaEvent_t entry : entries) {
      GENESIS_CUDA_RETURN_IF_ERROR_ON(plan.streams[i].device.index(),
                                      cudaStreamWaitEvent(lanes[i], entry, 0));
    }
  }

  // The groups. After an error, the exit joins still run so that nothing queued is
  // left unordered, and Copy still waits for what was queued.
  absl::Status first_error;
  bool pageable = false;
  for (const CopyGroup& group : plan.groups) {
    if (group.mechanism == Mechanism::kPageableStaging) pageable = true;
    if (NeedsHost(group.mechanism) || !first_error.ok()) continue;
    first_error = RunGroup(group, requests, lanes, plan.streams, capturing);
  }
  if (pageable && first_error.ok()) {
    // The pipeline is driven by the host: wait for the work before the batch.
    for (size_t i = 0; i < entries.size() && first_error.ok(); ++i) {
      first_error = cuda::CudaStatus(cudaEventSynchronize(entries[i]),
                                     "cudaEventSynchronize", ordering[i].device);
    }
    for (const CopyGroup& group : plan.groups) {
      if (group.mechanism != Mechanism::kPageableStaging || !first_error.ok()) continue;
      first_error = RunPageable(group, requests);
    }
  }

  // Exit: every ordering stream waits for every lane.
  absl::InlinedVector<cudaEvent_t, 8> exits;
  for (size_t i = 0; i < lanes.size(); ++i) {
    const int device = plan.streams[i].device.index();
    GENESIS_ASSIGN_OR_RETURN(cudaEvent_t event, AcquireEvent(device));
    events.emplace_back(device, event);
    GENESIS_ASSIGN_OR_RETURN(DeviceGuard guard, DeviceGuard::Create(device));
    GENESIS_CUDA_RETURN_IF_ERROR_ON(device, cudaEventRecord(event, lanes[i]));
    exits.push_back(event);
  }
  for (const OrderingStream& o : ordering) {
    GENESIS_ASSIGN_OR_RETURN(DeviceGuard guard, DeviceGuard::Create(o.device));
    for (cudaEvent_t exit : exits) {
      GENESIS_CUDA_RETURN_IF_ERROR_ON(o.device, cudaStreamWaitEvent(o.stream, exit, 0));
    }
  }
  if (synchronize) {
    for (size_t i = 0; i < exits.size(); ++i) {
      const absl::Status status = cuda::CudaStatus(
          cudaEventSynchronize(exits[i]), "cudaEventSynchronize", plan.streams[i].device.index());
      if (first_error.ok()) first_error = status;
    }
  }
  return first_error;
}

absl::Status CudaExecutor::RunGroup(const CopyGroup& group,
                                    absl::Span<const CopyRequest> requests,
                                    absl::Span<const cudaStream_t> lanes,
                                    const std::vector<StreamAssignment>& assignments,
                                    bool capturing) {
  const cudaStream_t lane = lanes[group.stream];
  const int device = assignments[group.stream].device.index();
  Mechanism mechanism = group.mechanism;
  if (mechanism == Mechanism::kStagedPeer) {
    return RunStagedPeer(group, requests, lane, lanes[group.second_stream]);
  }
  if (mechanism == Mechanism::kFusedKernel && group.direction != Direction::kDeviceToDevice &&
      !host_pointer_usable_[device]) {
    mechanism = Mechanism::kCopyEngine;  // The kernel could not use the host pointers.
  }
  if (mechanism == Mechanism::kBatchMemcpy && capturing) mechanism = Mechanism::kCopyEngine;
  if (mechanism == Mechanism::kPeerCopy || mechanism == Mechanism::kPeerFusedKernel) {
    const int src = group.src_device.index();
    const int dst = group.dst_device.index();
    // The kernel's device must reach the other one; copy engines use either direction.
    const int other = device == src ? dst : src;
    GENESIS_RETURN_IF_ERROR(EnablePeerAccess(device, other));
    if (mechanism == Mechanism::kPeerCopy && topology_.peer_access[other][device]) {
      GENESIS_RETURN_IF_ERROR(EnablePeerAccess(other, device));
    }
  }

  GENESIS_ASSIGN_OR_RETURN(DeviceGuard guard, DeviceGuard::Create(device));
  switch (mechanism) {
    case Mechanism::kFusedKernel:
      return LaunchFused(group.requests, requests, lane);
    case Mechanism::kPeerFusedKernel:
      return RunPeerFused(group, requests, lane, device);
    case Mechanism::kBatchMemcpy: {
      const size_t n = group.requests.size();
      std::vector<void*> dsts(n);
      std::vector<const void*> srcs(n);
      std::vector<size_t> sizes(n);
      for (size_t k = 0; k < n; ++k) {
        const CopyRequest& r = requests[group.requests[k]];
        dsts[k] = r.dst;
        srcs[k] = r.src;
        sizes[k] = r.bytes;
      }
      cudaMemcpyAttributes attributes{};
      attributes.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
      size_t attribute_index = 0;
      const cudaError_t err =
          cudaMemcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(), n, &attributes,
                               &attribute_index, 1, lane);
      if (err != cudaErrorNotSupported) {
        GENESIS_CUDA_RETURN_IF_ERROR_ON(device, err);
        // compute-sanitizer does not see these writes (sanitizer_marks.h).
        for (size_t k = 0; k < n; ++k) {
          const CopyRequest& r = requests[group.requests[k]];
          if (r.dst_device.is_cuda()) cuda::MarkInitialized(r.dst, r.bytes, lane);
        }
        return absl::OkStatus();
      }
      cuda::IgnoreCudaError(err);  // Copy one by one instead.
      [[fallthrough]];
    }
    case Mechanism::kCopyEngine:
      for (size_t i : group.requests) {
        const CopyRequest& r = requests[i];
        GENESIS_CUDA_RETURN_IF_ERROR_ON(
            device, cudaMemcpyAsync(r.dst, r.src, r.bytes, cudaMemcpyDefault, lane));
      }
      return absl::OkStatus();
    case Mechanism::kPeerCopy:
      for (size_t i : group.requests) {
        const CopyRequest& r = requests[i];
        GENESIS_CUDA_RETURN_IF_ERROR_ON(
            device, cudaMemcpyPeerAsync(r.dst, r.dst_device.index(), r.src,
                                        r.src_device.index(), r.bytes, lane));
      }
      return absl::OkStatus();
    default:
      return absl::InternalError(absl::StrCat("batch copy: mechanism ",
                                              ToAbsl(MechanismName(mechanism)),
                                              " is not run on a lane"));
  }
}

absl::Status CudaExecutor::RunPeerFused(const CopyGroup& group,
                                        absl::Span<const CopyRequest> requests,
                                        cudaStream_t lane, int device) {
  const std::vector<size_t>& members = group.requests;
  // Usually none (scattered copies): then nothing is allocated.
  const AdjacentRuns large =
      FindAdjacentRuns(requests, members, options_.plan.copy_engine_min_bytes);
  if (large.empty()) return LaunchFused(members, requests, lane);
  std::vector<size_t> fused;  // The copies between the large runs.
  size_t next = 0;
  for (const AdjacentRun& run : large) {
    fused.insert(fused.end(), members.begin() + next, members.begin() + run.begin);
    const CopyRequest& r = requests[members[run.begin]];
    GENESIS_CUDA_RETURN_IF_ERROR_ON(
        device, cudaMemcpyPeerAsync(r.dst, r.dst_device.index(), r.src,
                                    r.src_device.index(), run.bytes, lane));
    next = run.end;
  }
  fused.insert(fused.end(), members.begin() + next, members.end());
  if (fused.empty()) return absl::OkStatus();
  return LaunchFused(fused, requests, lane);
}

absl::Status CudaExecutor::RunStagedPeer(const CopyGroup& group,
                                         absl::Span<const CopyRequest> requests,
                                         cudaStream_t src_lane, cudaStream_t dst_lane) {
  const int src = group.src_device.index();
  const int dst = group.dst_device.index();
  GENESIS_ASSIGN_OR_RETURN(StagedPair * pair, StagedPairFor(src, dst));
  const size_t chunk = options_.staged_peer_chunk_bytes;
  std::lock_guard<std::mutex> lock(pair->mu);
  for (size_t i : group.requests) {
    const CopyRequest& r = requests[i];
    for (size_t offset = 0; offset < r.bytes; offset += chunk) {
      const size_t n = std::min(chunk, r.bytes - offset);
      const int slot = pair->next;
      void* buffer = pair->buffer[slot];
      {
        GENESIS_ASSIGN_OR_RETURN(DeviceGuard guard, DeviceGuard::Create(src));
        if (pair->drain_recorded[slot]) {
          GENESIS_CUDA_RETURN_IF_ERROR_ON(
              src, cudaStreamWaitEvent(src_lane, pair->drained[slot], 0));
        }
        GENESIS_CUDA_RETURN_IF_ERROR_ON(
            src, cudaMemcpyAsync(buffer, static_cast<const char*>(r.src) + offset, n,
                                 cudaMemcpyDeviceToHost, src_lane));
        GENESIS_CUDA_RETURN_IF_ERROR_ON(src, cudaEventRecord(pair->filled[slot], src_lane));
      }
      GENESIS_ASSIGN_OR_RETURN(DeviceGuard guard, DeviceGuard::Create(dst));
      GENESIS_CUDA_RETURN_IF_ERROR_ON(dst,
                                      cudaStreamWaitEvent(dst_lane, pair->filled[slot], 0));
      GENESIS_CUDA_RETURN_IF_ERROR_ON(
          dst, cudaMemcpyAsync(static_cast<char*>(r.dst) + offset, buffer, n,
                               cudaMemcpyHostToDevice, dst_lane));
      GENESIS_CUDA_RETURN_IF_ERROR_ON(dst, cudaEventRecord(pair->drained[slot], dst_lane));
      pair->drain_recorded[slot] = true;
      pair->next = 1 - slot;
    }
  }
  return absl::OkStatus();
}

absl::Status CudaExecutor::RunPageable(const CopyGroup& group,
                                       absl::Span<const CopyRequest> requests) {
  const bool to_device = group.direction == Direction::kHostToDevice;
  const int device = (to_device ? group.dst_device : group.src_device).index();
  GENESIS_ASSIGN_OR_RETURN(StagingPipeline * pipeline, SharedStagingPipeline(device));
  for (size_t i : group.requests) {
    const CopyRequest& r = requests[i];
    GENESIS_RETURN_IF_ERROR(to_device ? pipeline->HostToDevice(r.dst, r.src, r.bytes)
                                      : pipeline->DeviceToHost(r.dst, r.src, r.bytes));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<BatchExecutor>> CreateBatchExecutor(
    const BatchCopyOptions& options) {
  Topology topology;
  topology.device_count = cuda::DeviceCount();
  std::vector<bool> host_pointer_usable(topology.device_count, false);
  if (topology.device_count == 0) {
    return std::unique_ptr<BatchExecutor>(
        new CudaExecutor(options, std::move(topology), std::move(host_pointer_usable)));
  }
  if (!options.disable_peer_access) {
    GENESIS_ASSIGN_OR_RETURN(topology.peer_access, cuda::PeerAccessMatrix());
    for (int i = 0; i < topology.device_count; ++i) topology.peer_access[i][i] = false;
  }
  const cuda::Versions versions = cuda::GetVersions();
  topology.batch_memcpy_available = versions.runtime >= 12080 && versions.driver >= 12080;
  for (int d = 0; d < topology.device_count; ++d) {
    int usable = 0;
    GENESIS_CUDA_RETURN_IF_ERROR_ON(
        d, cudaDeviceGetAttribute(&usable, cudaDevAttrCanUseHostPointerForRegisteredMem, d));
    host_pointer_usable[d] = usable != 0;
  }
  return std::unique_ptr<BatchExecutor>(
      new CudaExecutor(options, std::move(topology), std::move(host_pointer_usable)));
}

}  // namespace genesis::transfer::internal
