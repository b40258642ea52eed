#include "genesis/distributed/nccl/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "genesis/core/absl_compat.h"
#include "genesis/core/status.h"
#include "genesis/cuda/device_guard.h"
#include "genesis/cuda/device_query.h"
#include "genesis/cuda/graph.h"
#include "genesis/cuda/internal/check.h"
#include "genesis/cuda/internal/driver.h"
#include "genesis/distributed/internal/group_health.h"
#include "genesis/distributed/internal/watchdog.h"
#include "genesis/distributed/internal/work_state.h"
#include "genesis/distributed/nccl/copy_engine_all_reduce.h"
#include "genesis/distributed/nccl/copy_engine_plan.h"
#include "genesis/distributed/nccl/one_shot_kernel.h"
#include "genesis/distributed/nccl/one_shot_plan.h"
#include "genesis/distributed/nccl/registration_cache.h"
#include "genesis/distributed/nccl/staging_plan.h"
#include "genesis/distributed/nccl/window_ranges.h"
#include "genesis/distributed/registration_policy.h"
#include "genesis/memory/cuda_virtual_memory.h"
#include "genesis/memory/pool_registry.h"

namespace genesis::distributed::nccl_backend {
namespace {

using internal::WorkState;

absl::Status NcclError(ncclResult_t result, std::string_view call, ncclComm_t comm) {
  std::string detail;
  if (comm != nullptr) {
    const char* last = ncclGetLastError(comm);
    if (last != nullptr && last[0] != '\0') detail = absl::StrCat(" (", last, ")");
  }
  const std::string text =
      absl::StrCat(ToAbsl(call), ": ", ncclGetErrorString(result), detail);
  switch (result) {
    case ncclInvalidArgument:
    case ncclInvalidUsage: return absl::InvalidArgumentError(text);
    case ncclRemoteError:
    case ncclSystemError: return absl::UnavailableError(text);
    default: return absl::InternalError(text);
  }
}

absl::StatusOr<ncclDataType_t> NcclType(DType dtype) {
  switch (dtype) {
    case DType::kUInt8: return ncclUint8;
    case DType::kInt8: return ncclInt8;
    case DType::kInt32: return ncclInt32;
    case DType::kInt64: return ncclInt64;
    case DType::kFloat16: return ncclFloat16;
    case DType::kBFloat16: return ncclBfloat16;
    case DType::kFloat32: return ncclFloat32;
    case DType::kFloat64: return ncclFloat64;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "NCCL does not reduce ", ToAbsl(DTypeName(dtype)),
          " (it reduces uint8, int8, int32, int64, float16, bfloat16, float32, float64)"));
  }
}

ncclRedOp_t NcclOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kProd: return ncclProd;
    case ReduceOp::kMin: return ncclMin;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kAvg: return ncclAvg;
  }
  return ncclSum;
}

// "4 x float32".
std::string DescribeBuffer(size_t count, DType dtype) {
  return absl::StrCat(count, " x ", ToAbsl(DTypeName(dtype)));
}

// The messages of a batch of sends and receives, as much of each as its description
// needs; inline up to two (a ring exchange's step, issued every step), so that a batch
// allocates nothing unless it is longer.
class BatchSummary {
 public:
  struct Message {
    size_t count = 0;
    int peer = 0;
    DType dtype = DType::kFloat32;
    bool send = false;
  };

  void Assign(absl::Span<const PeerOp> ops) {
    size_ = ops.size();
    if (size_ > inline_.size()) longer_.resize(size_);
    Message* out = size_ > inline_.size() ? longer_.data() : inline_.data();
    for (const PeerOp& op : ops) {
      *out++ = {op.buffer.count, op.peer, op.buffer.dtype, op.kind == PeerOp::Kind::kSend};
    }
  }
  size_t size() const { return size_; }
  const Message& operator[](size_t i) const {
    return size_ > inline_.size() ? longer_[i] : inline_[i];
  }

 private:
  size_t size_ = 0;
  std::array<Message, 2> inline_;
  std::vector<Message> longer_;
};

// What an operation is, kept as values and put into words only when an error or a
// caller asks: formatting it on every call cost more than NCCL's own call. Kept small:
// every operation writes one into its state.
struct OpSummary {
  OpSummary() = default;
  explicit OpSummary(const char* name) : name(name) {}
  OpSummary(const char* name, const Buffer& buffer, std::optional<ReduceOp> op = std::nullopt,
            const char* peer_words = nullptr, int peer = -1)
      : name(name),
        peer_words(peer_words),
        count(buffer.count),
        peer(peer),
        op(op),
        dtype(buffer.dtype),
        has_buffer(true) {}

  const char* name = "";
  // " to rank " / " from rank " before `peer` (the peer or root), when there is one.
  const char* peer_words = nullptr;
  // The buffer described ("4 x float32"), if `has_buffer`; none for a barrier.
  size_t count = 0;
  int peer = -1;
  std::optional<ReduceOp> op;
  DType dtype = DType::kFloat32;
  bool has_buffer = false;
  // A batch of sends and receives (two or more).
  BatchSummary batch;

  std::string ToString() const {
    if (batch.size() != 0) {
      std::string s = absl::StrCat("batch of ", batch.size(), ": ");
      for (size_t i = 0; i < batch.size(); ++i) {
        const BatchSummary::Message& m = batch[i];
        absl::StrAppend(&s, i == 0 ? "" : ", ", m.send ? "send of " : "recv of ",
                        DescribeBuffer(m.count, m.dtype), m.send ? " to rank " : " from rank ",
                        m.peer);
      }
      return s;
    }
    if (!has_buffer) return name;
    std::string s = absl::StrCat(name, " of ", DescribeBuffer(count, dtype));
    if (op.has_value()) absl::StrAppend(&s, " (", ToAbsl(ReduceOpName(*op)), ")");
    if (peer_words != nullptr) absl::StrAppend(&s, peer_words, peer);
    return s;
  }
};

// A buffer of an operation and what the operation does with it. A registered
// operation may find its operands pointed at staging slots (Issue), so the calls that
// operations issue read the addresses from here.
struct Operand {
  Operand(const Buffer& b, bool read, bool written, bool registered)
      : data(b.data), bytes(b.bytes()), read(read), written(written), registered(registered) {}
  void* data;
  size_t bytes;
  bool read;
  bool written;
  // The group's policy runs this buffer registered (registration_policy.h): every
  // operand of a collective alike; each message of a batch of sends and receives by its
  // own size, which both of its ends know.
  bool registered;
};

// The NCCL communicator itself, shared by the group and its works (which may outlive
// the group): destroyed when the last of them goes.
struct Comm {
  Comm(GroupInfo info) : info(std::move(info)), health(this->info.Describe()) {}
  ~Comm() {
    absl::StatusOr<cuda::DeviceGuard> guard = cuda::DeviceGuard::Create(info.device.index());
    if (registrations != nullptr) {
      // No unmapping can reach the cache once it is no listener any more.
      vm->RemovePieceListener(registrations.get());
      registrations->DeregisterAll();
    }
    FreeStaging();
    if (staging.done != nullptr) cudaEventDestroy(staging.done);
    if (one_shot.holds_last) cudaEventDestroy(one_shot.last_event);
    if (one_shot.abort != nullptr) cudaFreeHost(const_cast<int*>(one_shot.abort));
    for (cudaEvent_t e : free_events) cudaEventDestroy(e);
    if (cudaEvent_t e = returned_event.load()) cudaEventDestroy(e);
    if (reg_comm != comm) Close(reg_comm);
    if (comm != control) Close(comm);
    Close(control);
  }

  // Finalizes and destroys `c` (aborts it when the group failed or finalizing does not
  // finish within the timeout).
  void Close(ncclComm_t c) {
    if (c == nullptr) return;
    if (health.failed()) {
      ncclCommAbort(c);
      return;
    }
    const ncclResult_t r = ncclCommFinalize(c);
    if ((r != ncclSuccess && r != ncclInProgress) || !WaitAsync(c, "ncclCommFinalize").ok()) {
      ncclCommAbort(c);
      return;
    }
    ncclCommDestroy(c);
  }

  // Polls `c` until its last call has finished or the group's timeout passed. A
  // non-blocking communicator reports ncclInProgress meanwhile; for ncclCommSplit that
  // is the parent's state (the child stays null until the split is complete).
  absl::Status WaitAsync(ncclComm_t c, std::string_view call) {
    const absl::Time deadline = absl::Now() + info.timeout;
    for (;;) {
      ncclResult_t state = ncclSuccess;
      ncclResult_t result = ncclCommGetAsyncError(c, &state);
      if (result != ncclSuccess) return NcclError(result, "ncclCommGetAsyncError", c);
      if (state == ncclSuccess) return absl::OkStatus();
      if (state != ncclInProgress) return NcclError(state, call, c);
      if (absl::Now() > deadline) {
        return absl::DeadlineExceededError(absl::StrCat(
            ToAbsl(call), " did not finish within ", absl::FormatDuration(info.timeout)));
      }
      std::this_thread::yield();
    }
  }

  // Makes `comm`, the communicator operations run on, once `control` is ready: `control`
  // itself, or (nccl_blocking) a blocking copy of it made by ncclCommSplit, waited for
  // on `control` within the timeout. Every rank of the group calls it.
  absl::Status MakeOperationsComm() {
    if (!info.nccl_blocking || info.nccl_interop) {
      comm = control;
      return absl::OkStatus();
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 1;
    // The registered communicator of kAuto (SetUpRegistration) is split from this one
    // and shares its channels, buffers and streams: no second set of NCCL's buffers,
    // and NCCL orders the two communicators' kernels as one's.
    config.splitShare = info.nccl_registration == NcclRegistration::kAuto ? 1 : 0;
    GENESIS_RETURN_IF_ERROR(Split(control, 0, &comm, config));
    if (comm == nullptr) return absl::InternalError("ncclCommSplit made no communicator");
    return absl::OkStatus();
  }

  // ncclCommSplit of the non-blocking `parent` into `*child`, waited for on the parent
  // (NCCL writes `*child` when the split is complete, so it must outlive the wait).
  absl::Status Split(ncclComm_t parent, int color, ncclComm_t* child,
                     ncclConfig_t& config) {
    const ncclResult_t r = ncclCommSplit(parent, color, info.rank, child, &config);
    if (r != ncclSuccess && r != ncclInProgress) return NcclError(r, "ncclCommSplit", parent);
    return WaitAsync(parent, "ncclCommSplit");
  }

  // The result of a call issued on `c`: OK once it has been queued.
  absl::Status Issued(ncclComm_t c, ncclResult_t result, std::string_view call) {
    if (result == ncclSuccess) return absl::OkStatus();
    if (result == ncclInProgress) return WaitAsync(c, call);
    return NcclError(result, call, c);
  }

  // Sets up what the group's registration policy needs (nccl_communicator.h): the
  // communicator of registered operations and, where the device pool's memory allows
  // it, the cache that registers its pieces. Every rank calls it once, before the
  // first operation; under kAuto it splits `comm`, so every rank must.
  absl::Status SetUpRegistration() {
    NcclRegistration mode = info.nccl_registration;
    int version = 0;
    // Another client's ranks (interop) register nothing; 2.19 brought local registration.
    // kAuto's communicator shares the blocking operations communicator's resources; where
    // operations run on the non-blocking control communicator (nccl_blocking off), whose
    // every call is bounded, it is not made (a non-blocking split of its own would add a
    // second set of NCCL's buffers, and an abort that waits for it).
    if (info.nccl_interop || ncclGetVersion(&version) != ncclSuccess || version < 21900 ||
        (mode == NcclRegistration::kAuto && comm == control)) {
      mode = NcclRegistration::kOff;
    }
    if (mode == NcclRegistration::kOff) return absl::OkStatus();
    if (mode == NcclRegistration::kOn) {
      reg_comm = comm;
    } else {
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = 1;
      std::lock_guard<std::mutex> lock(mu);
      GENESIS_RETURN_IF_ERROR(Split(comm, 0, &reg_comm, config));
      if (reg_comm == nullptr) return absl::InternalError("ncclCommSplit made no communicator");
    }
    registering = true;
    absl::StatusOr<memory::CudaVirtualMemory*> found =
        memory::DeviceVirtualMemory(info.device.index());
    // Without exportable pool memory every buffer of a registered operation is staged.
    if (!found.ok() || *found == nullptr || !(*found)->exportable()) return absl::OkStatus();
    vm = *found;
    registrations = std::make_unique<RegistrationCache>(
        [vm = vm](const void* p) { return vm->PieceContaining(p); },
        [this](const memory::Piece& piece) -> absl::StatusOr<void*> {
          return RegisterRange(reinterpret_cast<void*>(piece.start), piece.size);
        },
        [this](void* handle) { DeregisterHandle(handle); });
    vm->AddPieceListener(registrations.get());
    return absl::OkStatus();
  }

  // ncclCommRegister of [data, data + bytes) with `reg_comm`; its handle.
  absl::StatusOr<void*> RegisterRange(void* data, size_t bytes) {
    std::lock_guard<std::mutex> lock(mu);
    if (reg_comm == nullptr || health.failed()) {
      return absl::FailedPreconditionError("the communicator is unusable");
    }
    void* handle = nullptr;
    GENESIS_RETURN_IF_ERROR(
        Issued(reg_comm, ncclCommRegister(reg_comm, data, bytes, &handle), "ncclCommRegister"));
    return handle;
  }

  // ncclCommDeregister of a handle RegisterRange gave.
  void DeregisterHandle(void* handle) {
    std::lock_guard<std::mutex> lock(mu);
    // An aborted communicator took its registrations with it; NCCL hands out no
    // handle when NCCL_LOCAL_REGISTER=0.
    if (reg_comm == nullptr || health.failed() || handle == nullptr) return;
    (void)Issued(reg_comm, ncclCommDeregister(reg_comm, handle), "ncclCommDeregister");
  }

  // Symmetric windows of `comm` (AllocateSymmetric): an operation whose buffers all lie
  // in them runs on `comm`, where NCCL's symmetric kernels serve it, registered or not
  // by the policy (every rank's buffers are in its window then, as symmetric memory
  // requires).
  void AddWindow(const void* data, size_t bytes) { windows.Add(data, bytes); }
  void RemoveWindow(const void* data) { windows.Remove(data); }
  bool InWindows(absl::Span<const Operand> operands) const {
    absl::InlinedVector<std::pair<const void*, size_t>, 4> buffers;
    for (const Operand& x : operands) buffers.push_back({x.data, x.bytes});
    return windows.ContainsAll(buffers);
  }

  // Whether `op` of `bytes` runs registered (registration_policy.h): the same answer
  // on every rank.
  bool RunsRegistered(NcclOperation op, size_t bytes) const {
    return registering && distributed::RunsRegistered(info.nccl_registration, op, bytes);
  }

  // Before a registered operation on `stream`: makes the staging area large enough for
  // `plan`, orders the operation after the area's last use on another stream, copies in
  // what the operation reads and points the operands at their slots. Needs staging_mu.
  absl::Status StageIn(const StagingPlan& plan, absl::Span<const StagedBuffer> originals,
                       absl::Span<void** const> addresses, CUstream_st* stream) {
    GENESIS_RETURN_IF_ERROR(GrowStaging(plan.bytes));
    if (staging.used && staging.last_stream != stream) {
      GENESIS_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream, staging.done, 0));
    }
    for (const StagingSlot& slot : plan.slots) {
      char* at = static_cast<char*>(staging.data) + slot.offset;
      const StagedBuffer& b = originals[slot.buffer];
      if (slot.copy_in) {
        GENESIS_CUDA_RETURN_IF_ERROR(
            cudaMemcpyAsync(at, b.data, b.bytes, cudaMemcpyDeviceToDevice, stream));
      }
      *addresses[slot.buffer] = at;
    }
    staged.fetch_add(static_cast<int64_t>(plan.slots.size()), std::memory_order_relaxed);
    return absl::OkStatus();
  }

  // After the operation: copies out what it wrote and marks the area's last use.
  // Needs staging_mu.
  absl::Status StageOut(const StagingPlan& plan, absl::Span<const StagedBuffer> originals,
                        CUstream_st* stream) {
    for (const StagingSlot& slot : plan.slots) {
      if (!slot.copy_out) continue;
      const StagedBuffer& b = originals[slot.buffer];
      GENESIS_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(const_cast<void*>(b.data), static_cast<char*>(staging.data) + slot.offset,
                          b.bytes, cudaMemcpyDeviceToDevice, stream));
    }
    GENESIS_CUDA_RETURN_IF_ERROR(cudaEventRecord(staging.done, stream));
    staging.last_stream = stream;
    staging.used = true;
    return absl::OkStatus();
  }

  // Replaces the staging area by one of at least `bytes` (twice the old, in whole
  // 2 MiB), from ncclMemAlloc (one physical allocation, so NCCL can register it) and
  // registered with `reg_comm`. The old one goes once its last operation has finished.
  // Needs staging_mu.
  absl::Status GrowStaging(size_t bytes) {
    if (bytes <= staging.bytes) return absl::OkStatus();
    if (staging.done == nullptr) {
      GENESIS_CUDA_RETURN_IF_ERROR(
          cudaEventCreateWithFlags(&staging.done, cudaEventDisableTiming));
    }
    GENESIS_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(staging.done));
    FreeStaging();
    constexpr size_t kStep = size_t{2} << 20;
    const size_t size = (std::max(bytes, 2 * staging_high) + kStep - 1) / kStep * kStep;
    void* data = nullptr;
    const ncclResult_t allocated = ncclMemAlloc(&data, size);
    if (allocated != ncclSuccess) {
      absl::Status error = NcclError(allocated, "ncclMemAlloc", nullptr);
      return absl::Status(allocated == ncclUnhandledCudaError ? absl::StatusCode::kResourceExhausted
                                                              : error.code(),
                          absl::StrCat("a staging area of ", size, " bytes for buffers that "
                                       "cannot be registered: ", error.message()));
    }
    absl::StatusOr<void*> handle = RegisterRange(data, size);
    if (!handle.ok()) {
      (void)ncclMemFree(data);
      return handle.status();
    }
    staging.data = data;
    staging.bytes = size;
    staging.handle = *handle;
    staging_high = size;
    return absl::OkStatus();
  }

  // Deregisters and frees the staging area (its operations have finished).
  void FreeStaging() {
    if (staging.data == nullptr) return;
    DeregisterHandle(staging.handle);
    (void)ncclMemFree(staging.data);
    staging.data = nullptr;
    staging.bytes = 0;
    staging.handle = nullptr;
    staging.last_stream = nullptr;
    staging.used = false;
  }

  // Makes the group unusable with `why` and stops its kernels. The operations'
  // communicator goes first: aborting one frees its host memory (cuMemFreeHost), which
  // waits for the whole device, so a kernel of `comm` still waiting for a dead peer must
  // have been told to stop before `control` goes (in the other order rank 0 of a
  // two-GPU group hung in the abort). Aborting `control` then also ends a split still
  // running from it (`comm` is null until the split is complete).
  void Fail(const absl::Status& why) {
    if (health.Fail(why)) {
      // One-shot kernels waiting for a dead peer stop first: the aborts below wait for
      // the device.
      if (one_shot.abort != nullptr) *one_shot.abort = 1;
      std::lock_guard<std::mutex> lock(mu);
      // So do the copy engines' waits for a dead peer's flags.
      if (copy_engine.all_reduce != nullptr) (void)copy_engine.all_reduce->Release();
      if (reg_comm != nullptr && reg_comm != comm) ncclCommAbort(reg_comm);
      if (comm != nullptr && comm != control) ncclCommAbort(comm);
      if (control != nullptr) ncclCommAbort(control);
      reg_comm = nullptr;
      comm = nullptr;
      control = nullptr;
    }
  }

  // Under `mu`: a finished operation's event for the next one, or null when none is
  // free (the caller then creates one). Taken under the lock the NCCL call takes anyway:
  // a lock of its own cost each operation a pair of atomics more.
  // Never the last one-shot operation's, which marks where the next one on another
  // stream starts (OneShotState): that one stays aside until another takes its place.
  cudaEvent_t TakeFreeEventLocked() {
    for (;;) {
      cudaEvent_t e = returned_event.exchange(nullptr, std::memory_order_acquire);
      if (e == nullptr) {
        if (free_events.empty()) return nullptr;
        e = free_events.back();
        free_events.pop_back();
      }
      if (e != one_shot.last_event) return e;
      one_shot.holds_last = true;
    }
  }

  // Takes back the event of a finished (or never queued) operation. Into
  // `returned_event` without a lock: operations issued and dropped in turn hand one
  // event from each to the next (taking `mu` here cost each operation a lock, and waited
  // for any NCCL call in progress on another thread). The one it displaces goes to the
  // free list.
  void ReturnEvent(cudaEvent_t e) {
    cudaEvent_t displaced = returned_event.exchange(e, std::memory_order_acq_rel);
    if (displaced == nullptr) return;
    std::lock_guard<std::mutex> lock(mu);
    free_events.push_back(displaced);
  }

  const GroupInfo info;
  internal::GroupHealth health;
  // Serialises calls on `comm` and `control` (a communicator is not thread-safe), among
  // them the deregistrations that come on the device's unmapping thread.
  std::mutex mu;
  // Operations run on `comm`. `control` is non-blocking, so that creating the group and
  // splitting it never wait past the timeout; it is `comm` itself when nccl_blocking is
  // off, and otherwise the parent of a blocking `comm` (MakeOperationsComm).
  ncclComm_t comm = nullptr;
  ncclComm_t control = nullptr;
  // Events are reused: creating one per operation costs more than a small collective.
  // Under `mu`.
  std::vector<cudaEvent_t> free_events;
  // The event returned last, if no operation has taken it yet (ReturnEvent).
  std::atomic<cudaEvent_t> returned_event{nullptr};
  // Registered operations run on `reg_comm` (SetUpRegistration): null when registration
  // is off, `comm` itself under kOn, split from `comm` under kAuto, so that only the
  // operations the policy names ever meet a registration. Under `mu` like `comm`.
  ncclComm_t reg_comm = nullptr;
  bool registering = false;  // Set once, before the first operation: reg_comm was made.
  // The pieces registered with `reg_comm`; null where the pool's memory cannot be
  // (then every buffer of a registered operation is staged). The cache's functions take
  // `mu`, so it is taken after the cache's lock, never before.
  memory::CudaVirtualMemory* vm = nullptr;
  std::unique_ptr<RegistrationCache> registrations;
  // Registered memory of the communicator's own for buffers that cannot be registered
  // (staging_plan.h). Taken before `mu`, never after: an operation holds it from its
  // copies in to its copies out.
  struct StagingArea {
    void* data = nullptr;
    size_t bytes = 0;
    void* handle = nullptr;            // Its registration with `reg_comm`.
    cudaEvent_t done = nullptr;        // Recorded after its last operation,
    CUstream_st* last_stream = nullptr;  // on this stream (null: the legacy default one),
    bool used = false;                   // once there was one.
  };
  std::mutex staging_mu;
  StagingArea staging;
  WindowRanges windows;     // AddWindow's.
  size_t staging_high = 0;  // The largest area so far (areas grow by doubling).
  std::atomic<int64_t> staged{0};

  // The one-shot collectives (nccl_communicator.h), set up once before the first
  // operation (NcclCommunicator::SetUpOneShot) and read-only after, but for the order
  // they keep across streams.
  struct OneShotState {
    bool enabled = false;
    std::string unavailable;  // Why not, when not enabled.
    std::optional<OneShotLayout> layout;
    void* window = nullptr;  // The ncclWindow_t of `local`'s memory.
    char* local = nullptr;
    volatile int* abort = nullptr;  // Mapped host memory: set when the group fails.
    // The last operation's stream (null: the legacy default stream) and its Work's event
    // (recorded under `mu`, right after its kernel; null before the first operation): an
    // operation on another stream waits for it. While `holds_last`, the Work is gone and
    // its event is kept out of the free list (TakeFreeEventLocked). Under `mu`.
    CUstream_st* last_stream = nullptr;
    cudaEvent_t last_event = nullptr;
    bool holds_last = false;
    std::atomic<int64_t> operations{0};

    // Whether a `kind` collective whose piece (what a rank sends each peer,
    // one_shot_plan.h) is `piece` bytes of `dtype` takes the one-shot path (`op`: a reduction's;
    // none for broadcast, all_gather and all_to_all): the same answer on every rank.
    bool Serves(OneShotKind kind, size_t piece, DType dtype, std::optional<ReduceOp> op) const {
      return enabled && layout->Serves(kind, piece) &&
             (!op.has_value() || OneShotReduces(dtype, *op));
    }
    // Whether a send to or receive from `peer` of `bytes` takes it (the peer's end of
    // the message has the same size, so it decides alike). Not this rank's own.
    bool ServesMessage(size_t bytes, int peer, int rank) const {
      return enabled && layout->ServesMessage(bytes) && peer != rank;
    }
  };
  OneShotState one_shot;

  // The copy engines' all_reduce (nccl_communicator.h), set up once before the first
  // operation (NcclCommunicator::SetUpCopyEngine); `all_reduce` is used under `mu` and
  // goes before the window it works in (the NcclCommunicator's).
  struct CopyEngineState {
    bool enabled = false;
    std::string unavailable;  // Why not, when not enabled.
    size_t min_bytes = 0;
    std::optional<CopyEngineLayout> layout;
    std::unique_ptr<CopyEngineAllReduce> all_reduce;
    std::atomic<int64_t> operations{0};

    // Whether an all_reduce of `bytes` of `dtype` with `op` takes it, not captured: the
    // same answer on every rank.
    bool Serves(size_t bytes, DType dtype, ReduceOp op) const {
      return enabled && bytes >= min_bytes && CopyEngineReduces(dtype, op);
    }
  };
  CopyEngineState copy_engine;

  // Queues the copy engines' all_reduce of `b` with `op` on its stream (not captured),
  // after the last one-shot operation if that was on another stream. Needs `mu`.
  absl::Status AllReduceByCopyEnginesLocked(const Buffer& b, ReduceOp op) {
    GENESIS_RETURN_IF_ERROR(OrderOneShotLocked(b.stream, /*captured=*/false));
    GENESIS_RETURN_IF_ERROR(
        copy_engine.all_reduce->AllReduce(b.data, b.bytes(), b.dtype, op, b.stream));
    copy_engine.operations.fetch_add(1, std::memory_order_relaxed);
    return absl::OkStatus();
  }

  // Queues the one-shot operation `args` (kind, buffers, piece, dtype, reduction,
  // root) on `stream` (`captured`: whether it is being captured), after the last one if
  // that was on another stream. Needs `mu`.
  absl::Status LaunchOneShotLocked(OneShotArgs args, CUstream_st* stream, bool captured) {
    OneShotState& o = one_shot;
    GENESIS_RETURN_IF_ERROR(OrderOneShotLocked(stream, captured));
    static_cast<OneShotWindow&>(args) = OneShotWindowOf();
    GENESIS_RETURN_IF_ERROR(LaunchOneShot(args, stream));
    o.operations.fetch_add(1, std::memory_order_relaxed);
    return absl::OkStatus();
  }

  // Queues `batch`'s sends and receives on `stream` (`captured`: whether it is being
  // captured) as the one-shot kernel's launches (OneShotPeerRounds), after the last
  // one-shot operation if that was on another stream. Needs `mu`.
  absl::Status LaunchOneShotPeersLocked(absl::Span<const OneShotMessage> batch, CUstream_st* stream,
                                        bool captured) {
    OneShotState& o = one_shot;
    GENESIS_RETURN_IF_ERROR(OrderOneShotLocked(stream, captured));
    absl::InlinedVector<OneShotPeerKey, 4> keys;
    for (const OneShotMessage& m : batch) keys.push_back({m.send, m.peer});
    absl::InlinedVector<int, 4> round(batch.size());
    const int rounds = OneShotPeerRounds(keys, absl::MakeSpan(round));
    OneShotPeerArgs args;
    static_cast<OneShotWindow&>(args) = OneShotWindowOf();
    for (int r = 0; r < rounds; ++r) {
      std::array<OneShotMessage, kOneShotMaxMessages> launch;
      size_t count = 0;
      for (size_t i = 0; i < batch.size(); ++i) {
        if (round[i] == r) launch[count++] = batch[i];
      }
      args.messages = absl::MakeConstSpan(launch.data(), count);
      GENESIS_RETURN_IF_ERROR(LaunchOneShotPeers(args, stream));
      o.operations.fetch_add(1, std::memory_order_relaxed);
    }
    return absl::OkStatus();
  }

  // What every one-shot launch needs of the group (set up once, read-only after).
  OneShotWindow OneShotWindowOf() const {
    const OneShotState& o = one_shot;
    return {o.window, o.local, &*o.layout, info.rank, o.abort};
  }

  // Makes `stream` wait for the last one-shot operation when that was on another
  // stream (not while `stream` is captured). Needs `mu`.
  absl::Status OrderOneShotLocked(CUstream_st* stream, bool captured) {
    const OneShotState& o = one_shot;
    // The last operation's event is null only before the first; its stream may be null,
    // the legacy default stream.
    if (!captured && o.last_event != nullptr && o.last_stream != stream) {
      GENESIS_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream, o.last_event, 0));
    }
    return absl::OkStatus();
  }

  // Notes that `event`, recorded right after the one-shot operation just queued on
  // `stream` (not captured), marks where the next one on another stream starts; the
  // event it replaces goes back to the free list if its Work is gone. Needs `mu`.
  void FollowOneShotLocked(CUstream_st* stream, cudaEvent_t event) {
    OneShotState& o = one_shot;
    if (o.holds_last) free_events.push_back(o.last_event);
    o.holds_last = false;
    o.last_event = event;
    o.last_stream = stream;
  }
};

// An operation in flight: done when its event has completed; failed when NCCL reports
// an error or the timeout has passed. Watched (internal/watchdog.h) from its issue until
// its last reference goes, so that a hang becomes an error even when nobody waits.
class NcclWorkState final : public WorkState, public internal::Watched {
 public:
  NcclWorkState(OpSummary summary, std::shared_ptr<Comm> comm, cudaEvent_t event)
      : WorkState(std::string(), Kind::kPolled),
        summary_(std::move(summary)),
        comm_(std::move(comm)),
        event_(event) {}
  ~NcclWorkState() override {
    // The event goes back to the communicator even while it is pending: the next
    // operation records it again, which is all it is used for (querying it here cost a
    // driver call per operation, and destroying pending ones made every pipelined
    // operation create a new event). Nothing else waits on it but the next one-shot
    // operation on another stream, and the communicator keeps the last one-shot
    // operation's event out of use for that. A failed group's events may never
    // complete, so they are destroyed.
    if (comm_->health.failed()) {
      cudaEventDestroy(event_);
    } else {
      comm_->ReturnEvent(event_);
    }
  }

  std::string description() const override {
    return absl::StrCat(summary_.ToString(), " in ", comm_->info.Describe());
  }

 protected:
  void Progress() override {
    if (comm_->health.failed()) {
      Finish(comm_->health.Check());
      return;
    }
    const cudaError_t query = cudaEventQuery(event_);
    if (query == cudaSuccess) {
      Finish(absl::OkStatus());
      return;
    }
    if (query != cudaErrorNotReady) {
      absl::Status error = absl::InternalError(absl::StrCat(
          description(), " failed: ", cudaGetErrorName(query), ": ", cudaGetErrorString(query)));
      comm_->Fail(error);
      Finish(error);
      return;
    }
    absl::Status error;
    {
      std::lock_guard<std::mutex> lock(comm_->mu);
      ncclComm_t registered = comm_->reg_comm != comm_->comm ? comm_->reg_comm : nullptr;
      for (ncclComm_t c : {comm_->comm, registered}) {
        ncclResult_t state = ncclSuccess;
        if (c != nullptr && error.ok() && ncclCommGetAsyncError(c, &state) == ncclSuccess &&
            state != ncclSuccess && state != ncclInProgress) {
          error = absl::UnavailableError(absl::StrCat(description(), " failed: ",
                                                      ncclGetErrorString(state)));
        }
      }
    }
    if (error.ok() && PastDeadline()) {
      error = absl::DeadlineExceededError(
          absl::StrCat(description(), " did not finish within ",
                       absl::FormatDuration(comm_->info.timeout),
                       " (a peer died or the ranks called different operations)"));
    }
    if (!error.ok()) {
      comm_->Fail(error);
      Finish(error);
    }
  }

 private:
  // Whether the timeout has passed since the operation was first found unfinished: the
  // clock is read then, not per operation when it is issued (the watchdog looks within
  // milliseconds, so the timeout stretches by at most that).
  bool PastDeadline() {
    const absl::Time now = absl::Now();
    int64_t deadline = deadline_ns_.load(std::memory_order_relaxed);
    if (deadline == 0) {
      const int64_t set = absl::ToUnixNanos(now + comm_->info.timeout);
      if (deadline_ns_.compare_exchange_strong(deadline, set, std::memory_order_relaxed)) {
        deadline = set;
      }
    }
    return absl::ToUnixNanos(now) > deadline;
  }

  const OpSummary summary_;
  std::shared_ptr<Comm> comm_;
  cudaEvent_t event_;
  // Unix nanoseconds; 0 until PastDeadline first runs.
  std::atomic<int64_t> deadline_ns_{0};
};

class NcclCommunicator final : public Communicator {
 public:
  explicit NcclCommunicator(std::shared_ptr<Comm> comm) : comm_(std::move(comm)) {}
  ~NcclCommunicator() override {
    if (one_shot_memory_ != nullptr && comm_->one_shot.operations.load() != 0) {
      // The window goes with this object; its last kernels may still run.
      absl::StatusOr<cuda::DeviceGuard> guard =
          cuda::DeviceGuard::Create(comm_->info.device.index());
      (void)cudaDeviceSynchronize();
    }
    comm_->one_shot.enabled = false;
    std::unique_ptr<CopyEngineAllReduce> copy_engine;
    {
      std::lock_guard<std::mutex> lock(comm_->mu);
      comm_->copy_engine.enabled = false;
      copy_engine = std::move(comm_->copy_engine.all_reduce);
    }
    // Waits for its last all_reduces, before its window goes.
    copy_engine.reset();
    if (barrier_buffer_ != nullptr) cudaFree(barrier_buffer_);
    if (agree_buffer_ != nullptr) cudaFree(agree_buffer_);
  }

  const GroupInfo& info() const override { return comm_->info; }
  absl::Status health() const override { return comm_->health.cause(); }

  absl::Status SupportsReduction(DType dtype, ReduceOp op) const override {
    GENESIS_RETURN_IF_ERROR(CheckReduction(op, dtype));
    return NcclType(dtype).status();
  }

  absl::StatusOr<Work> AllReduce(const Buffer& b, ReduceOp op) override {
    if (comm_->one_shot.Serves(OneShotKind::kAllReduce, b.bytes(), b.dtype, op)) {
      return IssueOneShot(OpSummary("all_reduce", b, op), OneShotKind::kAllReduce, b, b, b.bytes(),
                          op);
    }
    if (comm_->copy_engine.Serves(b.bytes(), b.dtype, op) && !cuda::IsCapturing(b.stream)) {
      Operand x[] = {{b, true, true, false}};
      return Issue(OpSummary("all_reduce", b, op), b.stream, x, [&](ncclComm_t, bool, const auto&) {
        return comm_->AllReduceByCopyEnginesLocked(b, op);
      });
    }
    GENESIS_ASSIGN_OR_RETURN(ncclDataType_t type, NcclType(b.dtype));
    const bool reg = comm_->RunsRegistered(NcclOperation::kAllReduce, b.bytes());
    Operand x[] = {{b, true, true, reg}};
    return Issue(OpSummary("all_reduce", b, op), b.stream, x, [&](ncclComm_t c) {
      return ncclAllReduce(x[0].data, x[0].data, b.count, type, NcclOp(op), c, b.stream);
    });
  }

  absl::StatusOr<Work> Broadcast(const Buffer& b, int root) override {
    if (comm_->one_shot.Serves(OneShotKind::kBroadcast, b.bytes(), b.dtype, std::nullopt)) {
      return IssueOneShot(OpSummary("broadcast", b, std::nullopt, " from rank ", root),
                          OneShotKind::kBroadcast, b, b, b.bytes(), std::nullopt, root);
    }
    const bool reg = comm_->RunsRegistered(NcclOperation::kBroadcast, b.bytes());
    Operand x[] = {{b, true, true, reg}};
    return Issue(OpSummary("broadcast", b, std::nullopt, " from rank ", root), b.stream, x,
                 [&](ncclComm_t c) {
                   return ncclBroadcast(x[0].data, x[0].data, b.bytes(), ncclUint8, root, c,
                                        b.stream);
                 });
  }

  absl::StatusOr<Work> Reduce(const Buffer& b, int root, ReduceOp op) override {
    if (comm_->one_shot.Serves(OneShotKind::kReduce, b.bytes(), b.dtype, op)) {
      return IssueOneShot(OpSummary("reduce", b, op, " to rank ", root), OneShotKind::kReduce, b, b,
                          b.bytes(), op, root);
    }
    GENESIS_ASSIGN_OR_RETURN(ncclDataType_t type, NcclType(b.dtype));
    const bool reg = comm_->RunsRegistered(NcclOperation::kReduce, b.bytes());
    Operand x[] = {{b, true, true, reg}};
    return Issue(OpSummary("reduce", b, op, " to rank ", root), b.stream, x, [&](ncclComm_t c) {
      return ncclReduce(x[0].data, x[0].data, b.count, type, NcclOp(op), root, c, b.stream);
    });
  }

  absl::StatusOr<Work> AllGather(const Buffer& in, const Buffer& out) override {
    if (comm_->one_shot.Serves(OneShotKind::kAllGather, in.bytes(), in.dtype, std::nullopt)) {
      return IssueOneShot(OpSummary("all_gather", in), OneShotKind::kAllGather, in, out, in.bytes(),
                          std::nullopt);
    }
    const bool reg = comm_->RunsRegistered(NcclOperation::kAllGather, out.bytes());
    Operand x[] = {{in, true, false, reg}, {out, false, true, reg}};
    return Issue(OpSummary("all_gather", in), in.stream, x, [&](ncclComm_t c) {
      return ncclAllGather(x[0].data, x[1].data, in.bytes(), ncclUint8, c, in.stream);
    });
  }

  absl::StatusOr<Work> ReduceScatter(const Buffer& in, const Buffer& out, ReduceOp op) override {
    if (comm_->one_shot.Serves(OneShotKind::kReduceScatter, out.bytes(), in.dtype, op)) {
      return IssueOneShot(OpSummary("reduce_scatter", in, op), OneShotKind::kReduceScatter, in, out,
                          out.bytes(), op);
    }
    GENESIS_ASSIGN_OR_RETURN(ncclDataType_t type, NcclType(in.dtype));
    const bool reg = comm_->RunsRegistered(NcclOperation::kReduceScatter, in.bytes());
    Operand x[] = {{in, true, false, reg}, {out, false, true, reg}};
    return Issue(OpSummary("reduce_scatter", in, op), in.stream, x, [&](ncclComm_t c) {
      return ncclReduceScatter(x[0].data, x[1].data, out.count, type, NcclOp(op), c, in.stream);
    });
  }

  absl::StatusOr<Work> AllToAll(const Buffer& in, const Buffer& out) override {
    const int n = comm_->info.size;
    const size_t chunk = in.bytes() / n;
    if (comm_->one_shot.Serves(OneShotKind::kAllToAll, chunk, in.dtype, std::nullopt)) {
      return IssueOneShot(OpSummary("all_to_all", in), OneShotKind::kAllToAll, in, out, chunk,
                          std::nullopt);
    }
    // Every rank's input has the same size: chunk bytes to and from each peer.
    const bool reg = comm_->RunsRegistered(NcclOperation::kAllToAll, in.bytes());
    Operand x[] = {{in, true, false, reg}, {out, false, true, reg}};
    return Issue(OpSummary("all_to_all", in), in.stream, x, [&](ncclComm_t c) {
      ncclResult_t r = ncclGroupStart();
      for (int peer = 0; peer < n && r == ncclSuccess; ++peer) {
        r = ncclSend(static_cast<char*>(x[0].data) + peer * chunk, chunk, ncclUint8, peer, c,
                     in.stream);
        if (r == ncclSuccess) {
          r = ncclRecv(static_cast<char*>(x[1].data) + peer * chunk, chunk, ncclUint8, peer, c,
                       in.stream);
        }
      }
      const ncclResult_t end = ncclGroupEnd();
      return r != ncclSuccess ? r : end;
    });
  }

  absl::StatusOr<Work> SendRecv(absl::Span<const PeerOp> ops) override {
    OpSummary what;
    if (ops.size() == 1) {
      const bool send = ops[0].kind == PeerOp::Kind::kSend;
      what = OpSummary(send ? "send" : "recv", ops[0].buffer, std::nullopt,
                       send ? " to rank " : " from rank ", ops[0].peer);
    } else {
      what.batch.Assign(ops);
    }
    CUstream_st* stream = ops.front().buffer.stream;
    absl::InlinedVector<Operand, 4> x;
    // The messages the one-shot kernel carries (decided per message, by size, as the
    // peer decides for its end), and which of the batch they are.
    absl::InlinedVector<OneShotMessage, 4> direct;
    absl::InlinedVector<bool, 4> is_direct;
    for (const PeerOp& op : ops) {
      if (op.buffer.stream != stream) {
        return absl::InvalidArgumentError(
            "a batch of sends and receives must use storages of one stream");
      }
      const bool send = op.kind == PeerOp::Kind::kSend;
      const bool one_shot =
          comm_->one_shot.ServesMessage(op.buffer.bytes(), op.peer, comm_->info.rank);
      if (one_shot) direct.push_back({send, op.peer, op.buffer.data, op.buffer.bytes()});
      is_direct.push_back(one_shot);
      // Decided per message: the peer's receive or send of it has the same size, so
      // both ends run it on the same communicator whatever else their batches hold.
      x.push_back(
          {op.buffer, send, !send,
           !one_shot && comm_->RunsRegistered(NcclOperation::kSendRecv, op.buffer.bytes())});
    }
    if (direct.empty()) {
      return Issue(std::move(what), stream, absl::MakeSpan(x),
                   [&](ncclComm_t c) { return SendRecvGroups(c, ops, x, is_direct); });
    }
    if (direct.size() == ops.size()) {
      return Issue(std::move(what), stream, absl::MakeSpan(x),
                   [&](ncclComm_t, bool captured, const auto&) {
                     return comm_->LaunchOneShotPeersLocked(direct, stream, captured);
                   });
    }
    // Beside NCCL's messages: the one-shot sends first (they wait for no receive of this
    // batch), then NCCL's group, then the one-shot receives, so that no message of the
    // batch waits for one queued after it (NCCL's group alone runs them all at once).
    const auto receives = std::stable_partition(direct.begin(), direct.end(),
                                                [](const OneShotMessage& m) { return m.send; });
    const size_t send_count = static_cast<size_t>(receives - direct.begin());
    const absl::Span<const OneShotMessage> sends_first(direct.data(), send_count);
    const absl::Span<const OneShotMessage> receives_last(direct.data() + send_count,
                                                         direct.size() - send_count);
    return Issue(
        std::move(what), stream, absl::MakeSpan(x),
        [&](ncclComm_t c, bool captured, const auto& description) -> absl::Status {
          if (!sends_first.empty()) {
            GENESIS_RETURN_IF_ERROR(comm_->LaunchOneShotPeersLocked(sends_first, stream, captured));
          }
          const ncclResult_t r = SendRecvGroups(c, ops, x, is_direct);
          if (r != ncclSuccess) return comm_->Issued(c, r, description());
          if (receives_last.empty()) return absl::OkStatus();
          return comm_->LaunchOneShotPeersLocked(receives_last, stream, captured);
        });
  }

  // Issues the messages of `ops` (operands `x`) that are not `direct` (the one-shot
  // kernel's). `c` is the registered communicator when any message runs registered.
  // The registered messages go first, as one NCCL group, then the others on the plain
  // communicator as another: every rank orders the two alike, and each message's two
  // ends are in the same one, so neither waits for the other rank's second group.
  ncclResult_t SendRecvGroups(ncclComm_t c, absl::Span<const PeerOp> ops,
                              absl::Span<const Operand> x, absl::Span<const bool> direct) {
    CUstream_st* stream = ops.front().buffer.stream;
    for (const bool registered : {true, false}) {
      const auto in_group = [&](size_t i) { return !direct[i] && x[i].registered == registered; };
      size_t i = 0;
      while (i < ops.size() && !in_group(i)) ++i;
      if (i == ops.size()) continue;
      ncclComm_t on = registered ? c : comm_->comm;
      ncclResult_t r = ncclGroupStart();
      for (; i < ops.size() && r == ncclSuccess; ++i) {
        if (!in_group(i)) continue;
        const PeerOp& op = ops[i];
        r = op.kind == PeerOp::Kind::kSend
                ? ncclSend(x[i].data, op.buffer.bytes(), ncclUint8, op.peer, on, stream)
                : ncclRecv(x[i].data, op.buffer.bytes(), ncclUint8, op.peer, on, stream);
      }
      const ncclResult_t end = ncclGroupEnd();
      if (r != ncclSuccess || end != ncclSuccess) return r != ncclSuccess ? r : end;
    }
    return ncclSuccess;
  }

  absl::StatusOr<Work> Barrier() override {
    if (barrier_buffer_ == nullptr) {
      GENESIS_ASSIGN_OR_RETURN(cuda::DeviceGuard guard,
                               cuda::DeviceGuard::Create(comm_->info.device.index()));
      GENESIS_CUDA_RETURN_IF_ERROR(cudaMalloc(&barrier_buffer_, sizeof(float)));
    }
    return Issue(OpSummary("barrier"), nullptr, {}, [&](ncclComm_t c) {
      return ncclAllReduce(barrier_buffer_, barrier_buffer_, 1, ncclFloat32, ncclSum, c,
                           nullptr);
    });
  }

  absl::StatusOr<std::unique_ptr<Communicator>> Split(absl::Span<const int> ranks,
                                                      const std::string& name) override {
    GENESIS_RETURN_IF_ERROR(comm_->health.Check());
    int new_rank = -1;
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (ranks[i] == comm_->info.rank) new_rank = static_cast<int>(i);
    }
    GroupInfo info = comm_->info;
    info.name = absl::StrCat(comm_->info.name, "/", name);
    info.rank = std::max(new_rank, 0);
    info.size = static_cast<int>(ranks.size());
    auto sub = std::make_shared<Comm>(info);
    GENESIS_ASSIGN_OR_RETURN(cuda::DeviceGuard guard,
                             cuda::DeviceGuard::Create(comm_->info.device.index()));
    // The sub-group's control communicator comes from the parent's, and the parent
    // waits for it (no operation may run on the parent meanwhile: the lock).
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    absl::Status split;
    {
      std::lock_guard<std::mutex> lock(comm_->mu);
      split = comm_->control == nullptr
                  ? comm_->health.Check()
                  : comm_->Split(comm_->control, new_rank >= 0 ? 0 : NCCL_SPLIT_NOCOLOR,
                                 &sub->control, config);
    }
    if (!split.ok()) {
      absl::Status error(split.code(), absl::StrCat("splitting ", comm_->info.Describe(),
                                                    " into '", name, "' failed: ",
                                                    split.message()));
      comm_->Fail(error);  // Aborting the parent ends the split, so `sub` may go.
      return error;
    }
    if (new_rank < 0) return std::unique_ptr<Communicator>();
    absl::Status made = sub->control == nullptr
                            ? absl::InternalError("ncclCommSplit made no communicator")
                            : sub->MakeOperationsComm();
    if (!made.ok()) {
      absl::Status error(made.code(), absl::StrCat("cannot create ", sub->info.Describe(), ": ",
                                                   made.message()));
      sub->Fail(error);
      return error;
    }
    absl::Status registration = sub->SetUpRegistration();
    if (!registration.ok()) {
      absl::Status error(registration.code(),
                         absl::StrCat("cannot set up buffer registration in ", sub->info.Describe(),
                                      ": ", registration.message()));
      sub->Fail(error);
      return error;
    }
    return WithWindowPaths(std::make_unique<NcclCommunicator>(std::move(sub)));
  }

  void Abort(const absl::Status& why) override { comm_->Fail(why); }

  absl::StatusOr<std::shared_ptr<SymmetricMemory>> AllocateSymmetric(size_t bytes) override {
    GENESIS_RETURN_IF_ERROR(comm_->health.Check());
    if (bytes == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("symmetric memory of 0 bytes in ", comm_->info.Describe()));
    }
    GENESIS_ASSIGN_OR_RETURN(cuda::DeviceGuard guard,
                             cuda::DeviceGuard::Create(comm_->info.device.index()));
    auto memory = std::make_shared<NcclSymmetricMemory>(comm_);
    const ncclResult_t allocated = ncclMemAlloc(&memory->data, bytes);
    if (allocated == ncclSuccess) memory->bytes = bytes;
    // The registration waits for every rank with no timeout: a rank whose allocation
    // failed must not leave the others waiting in it, so the ranks agree first (an
    // operation bounded by the group's timeout).
    GENESIS_ASSIGN_OR_RETURN(bool all, AllRanksAgree(allocated == ncclSuccess));
    if (allocated != ncclSuccess) {
      return NcclError(allocated, absl::StrCat("ncclMemAlloc of ", bytes, " bytes"), nullptr);
    }
    if (!all) {
      return absl::FailedPreconditionError(absl::StrCat(
          "another rank of ", comm_->info.Describe(),
          " could not allocate its symmetric memory of ", bytes, " bytes"));
    }
    absl::Status registered;
    {
      std::lock_guard<std::mutex> lock(comm_->mu);
      if (comm_->comm == nullptr) {
        registered = comm_->health.Check();
      } else {
        registered = comm_->Issued(
            comm_->comm, ncclCommWindowRegister(comm_->comm, memory->data, bytes, &memory->window,
                                   NCCL_WIN_COLL_SYMMETRIC),
            "ncclCommWindowRegister");
      }
    }
    if (!registered.ok()) {
      absl::Status error(registered.code(),
                         absl::StrCat("registering ", bytes, " bytes of symmetric memory in ",
                                      comm_->info.Describe(), " failed: ",
                                      registered.message()));
      comm_->Fail(error);
      return error;
    }
    if (memory->window == nullptr) {
      // NCCL returns success without a window where the communicator has no symmetric
      // support (and local registration is off); every rank sees the same.
      return absl::FailedPreconditionError(absl::StrCat(
          "NCCL registered no symmetric window in ", comm_->info.Describe(),
          ": this communicator has no symmetric memory support (it needs CUDA's virtual "
          "memory management and every rank reachable over NVLink or PCIe peer access "
          "on one node)"));
    }
    comm_->AddWindow(memory->data, bytes);
    return std::shared_ptr<SymmetricMemory>(std::move(memory));
  }

  // `c` with its one-shot collectives and copy engines' all_reduce set up; the group
  // fails when that fails.
  static absl::StatusOr<std::unique_ptr<Communicator>> WithWindowPaths(
      std::unique_ptr<NcclCommunicator> c) {
    absl::Status set_up = c->SetUpOneShot();
    if (set_up.ok()) set_up = c->SetUpCopyEngine();
    if (!set_up.ok()) {
      absl::Status error(set_up.code(), absl::StrCat("cannot create ", c->info().Describe(), ": ",
                                                     set_up.message()));
      c->comm_->Fail(error);
      return error;
    }
    return std::unique_ptr<Communicator>(std::move(c));
  }

  // Sets up the one-shot collectives (nccl_communicator.h) where the group's options ask
  // for them: every rank, once, before the first operation. Where they cannot serve,
  // says why (OneShot()) and leaves every operation to NCCL; errors when the ranks chose
  // different sizes, or the group itself failed meanwhile.
  absl::Status SetUpOneShot() {
    Comm::OneShotState& o = comm_->one_shot;
    const GroupInfo& info = comm_->info;
    o.unavailable = WindowsUnusable();
    if (!o.unavailable.empty()) return absl::OkStatus();
    if (info.size < 2 || info.size > kOneShotMaxRanks) {
      o.unavailable = absl::StrCat(info.size, " ranks (it serves 2 to ", kOneShotMaxRanks, ")");
      return absl::OkStatus();
    }
    // Ranks that chose differently would wait for each other in what follows, or later
    // in different kernels: an error now instead (sizes up to 4 MiB are exact floats).
    const auto chosen = static_cast<float>(info.nccl_one_shot_bytes);
    GENESIS_ASSIGN_OR_RETURN(auto min, MinAcrossRanks({chosen, -chosen}));
    if (min[0] != -min[1]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the ranks chose different nccl_one_shot_bytes, from ", min[0], " to ", -min[1],
          " (this rank: ", info.nccl_one_shot_bytes, "); every rank must choose the same"));
    }
    if (info.nccl_one_shot_bytes == 0) {
      o.unavailable = "nccl_one_shot_bytes is 0";
    } else {
      o.unavailable = OtherNcclThanBuiltFor();
    }
    if (!o.unavailable.empty()) return absl::OkStatus();
    // Alike on every rank so far; from here the ranks agree before they use it.
    GENESIS_ASSIGN_OR_RETURN(OneShotLayout layout,
                             OneShotLayout::Create(info.nccl_one_shot_bytes, info.size));
    absl::StatusOr<std::shared_ptr<SymmetricMemory>> memory = AllocateSymmetric(layout.bytes());
    if (!memory.ok()) {
      GENESIS_RETURN_IF_ERROR(comm_->health.Check());
      // Every rank sees the same: no symmetric memory support, or an allocation that
      // failed somewhere (AllocateSymmetric's ranks agree on it).
      o.unavailable = std::string(memory.status().message());
      return absl::OkStatus();
    }
    auto* window = static_cast<NcclSymmetricMemory*>(memory->get());
    absl::Status ready = SetUpOneShotMemory(*window, layout);
    GENESIS_ASSIGN_OR_RETURN(bool all, AllRanksAgree(ready.ok()));
    if (!all) {
      o.unavailable =
          ready.ok() ? "another rank could not set it up" : std::string(ready.message());
      return absl::OkStatus();
    }
    o.layout = layout;
    o.window = window->window;
    o.local = static_cast<char*>(window->data);
    o.enabled = true;
    one_shot_memory_ = *std::move(memory);
    return absl::OkStatus();
  }

  // Why neither the one-shot paths nor the copy engines can use a symmetric window of
  // this group ("" where they can, as far as the group's options tell): the same on
  // every rank.
  std::string WindowsUnusable() const {
    if (comm_->info.nccl_interop) {
      return "an interop group (the other client's ranks run NCCL's collectives)";
    }
    if (comm_->comm == comm_->control) {
      // Seen with NCCL 2.28.3 on two H200s: after a window was registered with the
      // non-blocking communicator, NCCL's own all_reduce of 4 MiB on it failed ("named
      // symbol not found").
      return "operations run on the non-blocking communicator (nccl_blocking off)";
    }
    return "";
  }

  // Why this process's NCCL is not the one whose windows genesis was built to read (""
  // where it is).
  static std::string OtherNcclThanBuiltFor() {
    int version = 0;
    if (ncclGetVersion(&version) == ncclSuccess && version / 100 == NCCL_VERSION_CODE / 100) {
      return "";
    }
    return absl::StrCat("this process runs NCCL ", NcclVersion().value_or("?"),
                        ", where genesis reads NCCL ", NCCL_MAJOR, ".", NCCL_MINOR, "'s windows");
  }

  // Sets up the copy engines' all_reduce (nccl_communicator.h) where the group's
  // options ask for it: every rank, once, after the one-shot paths. Where it cannot
  // serve, says why (CopyEngine()) and leaves every all_reduce to the other paths;
  // errors when the ranks chose different sizes, or the group failed meanwhile.
  absl::Status SetUpCopyEngine() {
    Comm::CopyEngineState& e = comm_->copy_engine;
    const GroupInfo& info = comm_->info;
    e.unavailable = WindowsUnusable();
    if (!e.unavailable.empty()) return absl::OkStatus();
    if (info.size < 2 || info.size > kCopyEngineMaxRanks) {
      e.unavailable = absl::StrCat(info.size, " ranks (it serves 2 to ", kCopyEngineMaxRanks, ")");
      return absl::OkStatus();
    }
    // As for the one-shot size: ranks that chose differently would wait for each other.
    // In MiB, exact as a float up to 16 TiB; the bytes below a MiB compare as a second value.
    const size_t chosen = info.nccl_copy_engine_bytes;
    const float mib = static_cast<float>(chosen >> 20), rest = static_cast<float>(chosen & 0xfffff);
    GENESIS_ASSIGN_OR_RETURN(auto least, MinAcrossRanks({mib, rest}));
    GENESIS_ASSIGN_OR_RETURN(auto most, MinAcrossRanks({-mib, -rest}));
    if (least[0] != -most[0] || least[1] != -most[1]) {
      return absl::InvalidArgumentError(
          absl::StrCat("the ranks chose different nccl_copy_engine_bytes (this rank: ", chosen,
                       "); every rank must choose the same"));
    }
    e.unavailable = chosen == 0 ? "nccl_copy_engine_bytes is 0" : OtherNcclThanBuiltFor();
    if (!e.unavailable.empty()) return absl::OkStatus();
    GENESIS_ASSIGN_OR_RETURN(CopyEngineLayout layout,
                             CopyEngineLayout::Create(info.size, kCopyEnginePiece));
    e.layout = layout;  // The all_reduce keeps a pointer to it.
    absl::StatusOr<std::shared_ptr<SymmetricMemory>> memory = AllocateSymmetric(layout.bytes());
    if (!memory.ok()) {
      GENESIS_RETURN_IF_ERROR(comm_->health.Check());
      e.unavailable = std::string(memory.status().message());
      return absl::OkStatus();
    }
    absl::StatusOr<std::unique_ptr<CopyEngineAllReduce>> all_reduce =
        CopyEnginesOver(*static_cast<NcclSymmetricMemory*>(memory->get()), *e.layout);
    // Every rank zeroed its flags before any rank's first copy: the agreement orders them.
    GENESIS_ASSIGN_OR_RETURN(bool all, AllRanksAgree(all_reduce.ok()));
    if (!all) {
      e.unavailable = all_reduce.ok() ? "another rank could not set it up"
                                      : std::string(all_reduce.status().message());
      return absl::OkStatus();
    }
    std::lock_guard<std::mutex> lock(comm_->mu);
    e.min_bytes = chosen;
    e.all_reduce = *std::move(all_reduce);
    e.enabled = true;
    copy_engine_memory_ = *std::move(memory);
    return absl::OkStatus();
  }

  CopyEngineStats copy_engine_stats() const {
    const Comm::CopyEngineState& e = comm_->copy_engine;
    CopyEngineStats stats;
    stats.enabled = e.enabled;
    stats.min_bytes = e.min_bytes;
    stats.piece = e.layout.has_value() ? e.layout->piece() : 0;
    stats.operations = e.operations.load(std::memory_order_relaxed);
    stats.unavailable = e.unavailable;
    return stats;
  }

  OneShotStats one_shot_stats() const {
    const Comm::OneShotState& o = comm_->one_shot;
    OneShotStats stats;
    stats.enabled = o.enabled;
    stats.budget = o.layout.has_value() ? o.layout->budget() : 0;
    stats.max_piece = o.layout.has_value() ? o.layout->max_piece() : 0;
    stats.operations = o.operations.load(std::memory_order_relaxed);
    stats.unavailable = o.unavailable;
    return stats;
  }

  RegistrationStats registration_stats() const {
    RegistrationStats stats = comm_->registrations != nullptr ? comm_->registrations->stats()
                                                              : RegistrationStats();
    stats.enabled = comm_->registering;
    stats.staged = comm_->staged.load(std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(comm_->staging_mu);
    stats.staging_bytes = static_cast<int64_t>(comm_->staging.bytes);
    return stats;
  }

 private:
  // Symmetric memory from ncclMemAlloc, registered as a window of `comm`.
  struct NcclSymmetricMemory final : SymmetricMemory {
    explicit NcclSymmetricMemory(std::shared_ptr<Comm> c) : comm(std::move(c)) {}
    ~NcclSymmetricMemory() override {
      if (window != nullptr) comm->RemoveWindow(data);
      absl::StatusOr<cuda::DeviceGuard> guard =
          cuda::DeviceGuard::Create(comm->info.device.index());
      if (window != nullptr) {
        std::lock_guard<std::mutex> lock(comm->mu);
        // Local to this rank; once the group has failed, its windows went with it.
        if (comm->comm != nullptr) (void)ncclCommWindowDeregister(comm->comm, window);
      }
      if (data != nullptr) (void)ncclMemFree(data);
    }
    std::shared_ptr<Comm> comm;
    ncclWindow_t window = nullptr;
  };

  // This rank's part of setting up the one-shot paths in `memory`: NCCL's window must be
  // one its kernels reach every rank through (its lsa rank is its rank), the window
  // zeroed (the epochs and the lines' flags start at 0; the ranks' agreement after it
  // orders every rank's zeroing before any peer's first line) and an abort flag.
  absl::Status SetUpOneShotMemory(const NcclSymmetricMemory& memory, const OneShotLayout& layout) {
    Comm::OneShotState& o = comm_->one_shot;
    GENESIS_ASSIGN_OR_RETURN(WindowRanks ranks, ReadWindowRanks(memory.window));
    if (ranks.world != comm_->info.rank || ranks.lsa != comm_->info.rank) {
      return absl::FailedPreconditionError(
          absl::StrCat("NCCL's window puts rank ", comm_->info.rank, " at ", ranks.world,
                       " of the communicator and ", ranks.lsa, " of the ranks it reaches"));
    }
    GENESIS_CUDA_RETURN_IF_ERROR(cudaMemset(memory.data, 0, layout.bytes()));
    GENESIS_CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
    if (o.abort == nullptr) {
      void* flag = nullptr;
      GENESIS_CUDA_RETURN_IF_ERROR(cudaHostAlloc(&flag, sizeof(int), cudaHostAllocMapped));
      o.abort = static_cast<volatile int*>(flag);
      *o.abort = 0;
    }
    return absl::OkStatus();
  }

  // This rank's copy engines' all_reduce over the window `memory` laid out as `layout`
  // (which outlives it), which NCCL must map
  // with the ranks in group order (its lsa rank is its rank): this rank's bytes where
  // ncclMemAlloc put them, each peer's where NCCL maps them in this process.
  absl::StatusOr<std::unique_ptr<CopyEngineAllReduce>> CopyEnginesOver(
      const NcclSymmetricMemory& memory, const CopyEngineLayout& layout) {
    GENESIS_ASSIGN_OR_RETURN(WindowRanks ranks, ReadWindowRanks(memory.window));
    if (ranks.world != comm_->info.rank || ranks.lsa != comm_->info.rank) {
      return absl::FailedPreconditionError(
          absl::StrCat("NCCL's window puts rank ", comm_->info.rank, " at ", ranks.world,
                       " of the communicator and ", ranks.lsa, " of the ranks it reaches"));
    }
    GENESIS_ASSIGN_OR_RETURN(cuda::DeviceGuard guard,
                             cuda::DeviceGuard::Create(comm_->info.device.index()));
    CopyEngineWindows windows;
    windows.layout = &layout;
    windows.rank = comm_->info.rank;
    for (int q = 0; q < comm_->info.size; ++q) {
      windows.windows[q] = q == windows.rank ? static_cast<char*>(memory.data) : ranks.Peer(q);
    }
    return CopyEngineAllReduce::Create(windows);
  }

  // Whether `mine` holds on every rank (MinAcrossRanks).
  absl::StatusOr<bool> AllRanksAgree(bool mine) {
    GENESIS_ASSIGN_OR_RETURN(auto min, MinAcrossRanks({mine ? 1.0f : 0.0f, 0.0f}));
    return min[0] == 1.0f;
  }

  // The smallest of each value across the ranks: a min all_reduce of two floats,
  // waited for (bounded by the group's timeout).
  absl::StatusOr<std::array<float, 2>> MinAcrossRanks(std::array<float, 2> values) {
    if (agree_buffer_ == nullptr) {
      GENESIS_CUDA_RETURN_IF_ERROR(cudaMalloc(&agree_buffer_, sizeof(values)));
    }
    GENESIS_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(agree_buffer_, values.data(), sizeof(values), cudaMemcpyHostToDevice));
    GENESIS_ASSIGN_OR_RETURN(Work work,
                             Issue(OpSummary("agreement"), nullptr, {}, [&](ncclComm_t c) {
                               return ncclAllReduce(agree_buffer_, agree_buffer_, values.size(),
                                                    ncclFloat32, ncclMin, c, nullptr);
                             }));
    GENESIS_RETURN_IF_ERROR(work.Wait());
    GENESIS_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(values.data(), agree_buffer_, sizeof(values), cudaMemcpyDeviceToHost));
    return values;
  }

  // Issues the one-shot `kind` of `piece` bytes per rank from `in` into `out` (the
  // same buffer for all_reduce, reduce and broadcast) on `in`'s stream.
  absl::StatusOr<Work> IssueOneShot(OpSummary what, OneShotKind kind, const Buffer& in,
                                    const Buffer& out, size_t piece, std::optional<ReduceOp> op,
                                    int root = 0) {
    OneShotArgs args;
    args.kind = kind;
    args.in = in.data;
    args.out = out.data;
    args.piece = piece;
    args.dtype = in.dtype;
    args.op = op.value_or(ReduceOp::kSum);
    args.root = root;
    Operand x[] = {{in, true, false, false}, {out, false, true, false}};
    return Issue(std::move(what), in.stream, x, [&](ncclComm_t, bool captured, const auto&) {
      return comm_->LaunchOneShotLocked(args, in.stream, captured);
    });
  }

  // Issues `call` on the communicator (under its lock, on its device) and returns a
  // Work that completes with the stream's work. An operation with `registered`
  // operands (the group's policy says so, alike on every rank) runs on the registered
  // communicator, and each of those operands is registered: in a piece of the pool it
  // is (registering the piece once), elsewhere it is copied through the staging area
  // before and after the operation. `call` gets that communicator, else the plain one;
  // a batch that mixes registered and unregistered messages issues the others on
  // `comm_->comm` itself.
  // While `stream` is captured into a CUDA graph, NCCL records the call into the graph,
  // which runs it at every replay: nothing runs now, so the Work has finished at once,
  // with no event and nothing for the watchdog (whoever replays the graph waits for its
  // stream). A captured operation runs as an unregistered one: NCCL registers captured
  // buffers itself (NCCL_GRAPH_REGISTER), and staging slots must not be shared with a
  // graph that replays later. So does one whose buffers all lie in symmetric windows
  // (registered with `comm`, not the registered communicator).
  template <typename Call>
  absl::StatusOr<Work> Issue(OpSummary what, CUstream_st* stream, absl::Span<Operand> operands,
                             Call&& call) {
    GENESIS_RETURN_IF_ERROR(comm_->health.Check());
    // Put into words only on the error paths below.
    auto description = [&] { return absl::StrCat(what.ToString(), " in ", comm_->info.Describe()); };
    GENESIS_ASSIGN_OR_RETURN(cuda::DeviceGuard guard,
                             cuda::DeviceGuard::Create(comm_->info.device.index()));
    const bool captured = cuda::IsCapturing(stream);
    bool registered = std::any_of(operands.begin(), operands.end(),
                                  [](const Operand& x) { return x.registered; });
    if (registered && (captured || comm_->InWindows(operands))) {
      registered = false;
      for (Operand& x : operands) x.registered = false;
    }
    // Registered operations: which operands are registered, and slots for the others
    // that the policy runs registered.
    absl::InlinedVector<StagedBuffer, 4> originals;
    StagingPlan plan;
    std::unique_lock<std::mutex> staging_lock;
    absl::Status issued;
    if (registered) {
      for (const Operand& x : operands) {
        const bool in_piece = x.registered && comm_->registrations != nullptr &&
                              x.data != nullptr && x.bytes != 0 &&
                              comm_->registrations->Prepare(x.data, x.bytes);
        // An operand the policy runs unregistered needs no slot either.
        originals.push_back({x.data, x.bytes, x.read, x.written, in_piece || !x.registered});
      }
      plan = PlanStaging(originals);
      if (!plan.slots.empty()) {
        staging_lock = std::unique_lock<std::mutex>(comm_->staging_mu);
        absl::InlinedVector<void**, 4> addresses;
        for (Operand& x : operands) addresses.push_back(&x.data);
        issued = comm_->StageIn(plan, originals, absl::MakeSpan(addresses), stream);
      }
    }
    cudaEvent_t event = nullptr;
    bool recorded = false;
    if (issued.ok()) {
      std::lock_guard<std::mutex> lock(comm_->mu);
      if (!captured) event = comm_->TakeFreeEventLocked();
      ncclComm_t c = registered ? comm_->reg_comm : comm_->comm;
      if (c == nullptr || comm_->comm == nullptr) {
        issued = comm_->health.Check();
      } else if constexpr (std::is_invocable_v<Call&, ncclComm_t, bool, decltype(description)&>) {
        // A kernel of genesis's own (one-shot collectives), told whether it is captured
        // (checked once per operation, above), and the operation's description for the
        // errors of NCCL calls it makes beside. Its event is recorded under the lock: the
        // next one-shot operation on another stream waits for it.
        issued = call(c, captured, description);
        if (issued.ok() && !captured) {
          if (event == nullptr) issued = CreateEvent(&event);
          if (issued.ok()) issued = RecordEvent(event, stream);
          if (issued.ok()) comm_->FollowOneShotLocked(stream, event);
          recorded = true;
        }
      } else {
        const ncclResult_t result = call(c);
        if (result != ncclSuccess) issued = comm_->Issued(c, result, description());
      }
    }
    if (issued.ok() && !plan.slots.empty()) issued = comm_->StageOut(plan, originals, stream);
    if (staging_lock.owns_lock()) staging_lock.unlock();
    if (issued.ok() && !captured && event == nullptr) {
      // None was free (the first operations): a new one, after the call, off the lock.
      issued = CreateEvent(&event);
    }
    if (issued.ok() && !captured && !recorded) issued = RecordEvent(event, stream);
    if (!issued.ok()) {
      if (event != nullptr) comm_->ReturnEvent(event);
      absl::Status error(issued.code(),
                         absl::StrCat(description(), captured ? " failed while captured: " : " failed: ",
                                      issued.message()));
      comm_->Fail(error);
      return error;
    }
    if (captured) return Work();
    // Watched until the last reference goes (internal/watchdog.h): a dropped Work frees
    // its state at once, and the next operation gets the same, still cached, memory
    // back (docs/distributed.md, "The host path of an operation").
    std::shared_ptr<NcclWorkState> state =
        Watchdogs().Watch(std::make_unique<NcclWorkState>(std::move(what), comm_, event), stream);
    return Work(std::move(state));  // Moved: a copy is two more atomic operations.
  }

  // Makes an operation's event (no timing) in `*event`, unchanged on failure.
  static absl::Status CreateEvent(cudaEvent_t* event) {
    cudaEvent_t made = nullptr;
    GENESIS_RETURN_IF_ERROR(cuda::CudaStatus(
        cudaEventCreateWithFlags(&made, cudaEventDisableTiming), "cudaEventCreateWithFlags"));
    *event = made;
    return absl::OkStatus();
  }

  // Records `event` on `stream` through the driver's cuEventRecord where the driver has
  // it: the runtime's cudaEventRecord adds about 0.1 us of its own to each operation
  // (0.24 against 0.14 us on an H200's host, issue_path_benchmark).
  static absl::Status RecordEvent(cudaEvent_t event, CUstream_st* stream) {
    static const auto record =
        cuda::DriverFunctionOrNull<decltype(&::cuEventRecord)>("cuEventRecord");
    if (record == nullptr) {
      return cuda::CudaStatus(cudaEventRecord(event, stream), "cudaEventRecord");
    }
    return cuda::DriverStatus(record(event, stream), "cuEventRecord");
  }

  // Every 5 ms. Never destroyed: works may outlive main.
  static internal::Watchdog& Watchdogs() {
    static internal::Watchdog* watchdog = new internal::Watchdog(absl::Milliseconds(5));
    return *watchdog;
  }

  std::shared_ptr<Comm> comm_;
  void* barrier_buffer_ = nullptr;
  void* agree_buffer_ = nullptr;  // MinAcrossRanks's two floats.
  // The one-shot collectives' window, when they are enabled.
  std::shared_ptr<SymmetricMemory> one_shot_memory_;
  std::shared_ptr<SymmetricMemory> copy_engine_memory_;  // The copy engines' window.
};

}  // namespace

absl::StatusOr<std::vector<char>> NewUniqueId() {
  ncclUniqueId id;
  ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) return NcclError(r, "ncclGetUniqueId", nullptr);
  static_assert(sizeof(id.internal) == kUniqueIdBytes);
  return std::vector<char>(id.internal, id.internal + kUniqueIdBytes);
}

absl::StatusOr<std::unique_ptr<Communicator>> ConnectNccl(GroupInfo info,
                                                          absl::Span<const char> unique_id) {
  GENESIS_RETURN_IF_ERROR(CheckRequestedLibrary());
  if (!info.device.is_cuda()) {
    return absl::InvalidArgumentError(
        absl::StrCat("an NCCL group works on a GPU, not ", info.device.ToString()));
  }
  if (info.nccl_one_shot_bytes > kOneShotMaxBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "nccl_one_shot_bytes = ", info.nccl_one_shot_bytes, " (at most ", kOneShotMaxBytes, ")"));
  }
  if (unique_id.size() != kUniqueIdBytes) {
    return absl::InvalidArgumentError(absl::StrCat("NCCL unique id of ", unique_id.size(),
                                                   " bytes, expected ", kUniqueIdBytes));
  }
  GENESIS_ASSIGN_OR_RETURN(cuda::DeviceGuard guard,
                           cuda::DeviceGuard::Create(info.device.index()));
  ncclUniqueId id;
  std::memcpy(id.internal, unique_id.data(), kUniqueIdBytes);
  auto comm = std::make_shared<Comm>(info);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // The control communicator: creating it is bounded by the timeout.
  ncclResult_t r = ncclCommInitRankConfig(&comm->control, info.size, id, info.rank, &config);
  absl::Status status = r == ncclSuccess || r == ncclInProgress
                            ? comm->WaitAsync(comm->control, "ncclCommInitRankConfig")
                            : NcclError(r, "ncclCommInitRankConfig", nullptr);
  if (status.ok()) status = comm->MakeOperationsComm();
  if (status.ok()) status = comm->SetUpRegistration();
  if (!status.ok()) {
    absl::Status error(status.code(), absl::StrCat("cannot create ", info.Describe(), " on ",
                                                   info.device.ToString(), ": ",
                                                   status.message()));
    comm->Fail(error);
    return error;
  }
  return NcclCommunicator::WithWindowPaths(std::make_unique<NcclCommunicator>(std::move(comm)));
}

absl::StatusOr<RegistrationStats> BufferRegistration(const Communicator& communicator) {
  const auto* nccl = dynamic_cast<const NcclCommunicator*>(&communicator);
  if (nccl == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "buffer registration is NCCL's: ", communicator.info().Describe(), " is not NCCL"));
  }
  return nccl->registration_stats();
}

absl::StatusOr<OneShotStats> OneShot(const Communicator& communicator) {
  const auto* nccl = dynamic_cast<const NcclCommunicator*>(&communicator);
  if (nccl == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the one-shot collectives are NCCL's: ", communicator.info().Describe(), " is not NCCL"));
  }
  return nccl->one_shot_stats();
}

absl::StatusOr<CopyEngineStats> CopyEngine(const Communicator& communicator) {
  const auto* nccl = dynamic_cast<const NcclCommunicator*>(&communicator);
  if (nccl == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("the copy engines' all_reduce is NCCL's: ",
                                                   communicator.info().Describe(), " is not NCCL"));
  }
  return nccl->copy_engine_stats();
}

std::string NcclLibrary() {
  // The device query's probe opens libnccl.so.2 by name, which is the library this
  // process already runs with.
  return cuda::GetVersions().nccl_library;
}

absl::Status CheckRequestedLibrary() {
  const char* requested = std::getenv("GENESIS_NCCL_LIBRARY");
  if (requested == nullptr || requested[0] == '\0') return absl::OkStatus();
  std::error_code error;
  const std::filesystem::path wanted = std::filesystem::canonical(requested, error);
  if (error) {
    return absl::InvalidArgumentError(absl::StrCat("GENESIS_NCCL_LIBRARY=", Quoted(requested),
                                                   " cannot be loaded: ", error.message()));
  }
  const std::string loaded = NcclLibrary();
  const std::filesystem::path running = std::filesystem::canonical(loaded, error);
  if (error || running != wanted) {
    GENESIS_ASSIGN_OR_RETURN(std::string version, NcclVersion());
    return absl::FailedPreconditionError(absl::StrCat(
        "this process runs NCCL ", version, " from ", loaded.empty() ? "an unknown file" : loaded,
        ", not GENESIS_NCCL_LIBRARY=", Quoted(requested), ": the dynamic loader picks NCCL when "
        "the program starts; put ", wanted.parent_path().string(),
        " first in LD_LIBRARY_PATH"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> NcclVersion() {
  int version = 0;
  ncclResult_t r = ncclGetVersion(&version);
  if (r != ncclSuccess) return NcclError(r, "ncclGetVersion", nullptr);
  return absl::StrCat(version / 10000, ".", version / 100 % 100, ".", version % 100);
}

}  // namespace genesis::distributed::nccl_backend
