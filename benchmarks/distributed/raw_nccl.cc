#include "benchmarks/distributed/raw_nccl.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "genesis/cuda/internal/driver.h"

namespace genesis::benchmarks {
namespace {

absl::Status Check(ncclResult_t r, const char* call) {
  if (r == ncclSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(call, ": ", ncclGetErrorString(r)));
}

absl::Status Check(cudaError_t r, const char* call) {
  if (r == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(call, ": ", cudaGetErrorString(r)));
}

class RawNcclImpl final : public RawNccl {
 public:
  ~RawNcclImpl() override {
    if (window_ != nullptr) ncclCommWindowDeregister(comm_, window_);
    if (send_handle_ != nullptr) ncclCommDeregister(comm_, send_handle_);
    if (recv_handle_ != nullptr) ncclCommDeregister(comm_, recv_handle_);
    if (comm_ != nullptr) ncclCommDestroy(comm_);
    if (parent_ != nullptr) ncclCommDestroy(parent_);
    for (void* p : {send_, recv_}) {
      if (p == nullptr) continue;
      if (memory_ == Memory::kNcclWindow) {
        if (p == send_) ncclMemFree(p);  // recv_ lies in send_'s allocation.
      } else if (memory_ == Memory::kNcclRegistered) {
        ncclMemFree(p);
      } else {
        cudaFree(p);
      }
    }
    if (barrier_ != nullptr) cudaFree(barrier_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    if (event_ != nullptr) cudaEventDestroy(event_);
  }

  void UseBuffers(void* send, void* recv) override {
    use_send_ = send;
    use_recv_ = recv;
  }

  absl::Status RecordEvents(bool on) override {
    if (on) {
      if (auto s = MakeEvent(); !s.ok()) return s;
    }
    record_events_ = on;
    return absl::OkStatus();
  }

  absl::Status Init(int rank, int size, int device, absl::Span<const char> id_bytes,
                    size_t max_bytes, Memory memory, Comm comm) {
    rank_ = rank;
    size_ = size;
    memory_ = memory;
    if (id_bytes.size() != sizeof(ncclUniqueId)) {
      return absl::InvalidArgumentError("unique id of the wrong size");
    }
    ncclUniqueId id;
    std::memcpy(id.internal, id_bytes.data(), sizeof(id.internal));
    if (auto s = Check(cudaSetDevice(device), "cudaSetDevice"); !s.ok()) return s;
    if (auto s = Check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "stream");
        !s.ok()) {
      return s;
    }
    if (memory == Memory::kNcclWindow) {
      if (auto s = Check(ncclMemAlloc(&send_, 2 * max_bytes), "ncclMemAlloc"); !s.ok()) return s;
      recv_ = static_cast<char*>(send_) + max_bytes;
    } else if (memory == Memory::kNcclRegistered) {
      if (auto s = Check(ncclMemAlloc(&send_, max_bytes), "ncclMemAlloc"); !s.ok()) return s;
      if (auto s = Check(ncclMemAlloc(&recv_, max_bytes), "ncclMemAlloc"); !s.ok()) return s;
    } else if (memory == Memory::kCudaMalloc) {
      if (auto s = Check(cudaMalloc(&send_, max_bytes), "cudaMalloc"); !s.ok()) return s;
      if (auto s = Check(cudaMalloc(&recv_, max_bytes), "cudaMalloc"); !s.ok()) return s;
    }
    if (auto s = Check(cudaMalloc(&barrier_, sizeof(float)), "cudaMalloc"); !s.ok()) return s;
    if (auto s = MakeComm(comm, id); !s.ok()) return s;
    if (memory == Memory::kNcclWindow) {
      if (auto s = Check(ncclCommWindowRegister(comm_, send_, 2 * max_bytes, &window_,
                                                NCCL_WIN_COLL_SYMMETRIC),
                         "ncclCommWindowRegister");
          !s.ok()) {
        return s;
      }
      if (window_ == nullptr) {
        return absl::FailedPreconditionError("NCCL registered no symmetric window");
      }
      return absl::OkStatus();
    }
    if (memory != Memory::kNcclRegistered) return absl::OkStatus();
    if (auto s = Check(ncclCommRegister(comm_, send_, max_bytes, &send_handle_),
                       "ncclCommRegister");
        !s.ok()) {
      return s;
    }
    return Check(ncclCommRegister(comm_, recv_, max_bytes, &recv_handle_), "ncclCommRegister");
  }

  absl::StatusOr<double> Time(const std::string& op, size_t bytes, int warmup,
                              int iters) override {
    const size_t count = bytes / sizeof(float);
    for (int i = 0; i < warmup; ++i) {
      if (auto s = Issue(op, count); !s.ok()) return s;
    }
    if (auto s = Barrier(); !s.ok()) return s;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) {
      if (auto s = Issue(op, count); !s.ok()) return s;
      if (record_events_) {
        if (auto s = Check(cudaEventRecord(event_, stream_), "cudaEventRecord"); !s.ok()) {
          return s;
        }
      }
    }
    if (auto s = Check(cudaStreamSynchronize(stream_), "sync"); !s.ok()) return s;
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
           iters;
  }

  absl::StatusOr<double> TimeDriverEventRecord(int calls) override {
    if (auto s = MakeEvent(); !s.ok()) return s;
    decltype(&::cuEventRecord) record = nullptr;
    if (auto s = cuda::ResolveDriverFunction("cuEventRecord", &record); !s.ok()) return s;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) {
      if (auto s = cuda::DriverStatus(record(event_, stream_), "cuEventRecord"); !s.ok()) {
        return s;
      }
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (auto s = Check(cudaStreamSynchronize(stream_), "sync"); !s.ok()) return s;
    return seconds / calls;
  }

  absl::StatusOr<double> TimeDriverStreamWrite(int calls) override {
    decltype(&::cuStreamWriteValue64) write = nullptr;
    if (auto s = cuda::ResolveDriverFunction("cuStreamWriteValue64", &write); !s.ok()) return s;
    void* host = nullptr;
    if (auto s =
            Check(cudaHostAlloc(&host, sizeof(uint64_t), cudaHostAllocMapped), "cudaHostAlloc");
        !s.ok()) {
      return s;
    }
    *static_cast<volatile uint64_t*>(host) = 0;
    void* target = nullptr;
    absl::Status status =
        Check(cudaHostGetDevicePointer(&target, host, 0), "cudaHostGetDevicePointer");
    double seconds = 0;
    if (status.ok()) {
      const auto start = std::chrono::steady_clock::now();
      for (int i = 1; i <= calls && status.ok(); ++i) {
        status = cuda::DriverStatus(
            write(stream_, reinterpret_cast<CUdeviceptr>(target), static_cast<uint64_t>(i), 0),
            "cuStreamWriteValue64");
      }
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      status.Update(Check(cudaStreamSynchronize(stream_), "sync"));
    }
    if (status.ok() && *static_cast<volatile uint64_t*>(host) != static_cast<uint64_t>(calls)) {
      status = absl::InternalError("the host did not see the last value written");
    }
    cudaFreeHost(host);
    if (!status.ok()) return status;
    return seconds / calls;
  }

  absl::StatusOr<double> TimeGraph(const std::string& op, size_t bytes, int ops,
                                   int replays) override {
    const size_t count = bytes / sizeof(float);
    if (auto s = Check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal),
                       "cudaStreamBeginCapture");
        !s.ok()) {
      return s;
    }
    for (int i = 0; i < ops; ++i) {
      if (auto s = Issue(op, count); !s.ok()) {
        cudaGraph_t abandoned = nullptr;
        cudaStreamEndCapture(stream_, &abandoned);
        if (abandoned != nullptr) cudaGraphDestroy(abandoned);
        return s;
      }
    }
    cudaGraph_t graph = nullptr;
    if (auto s = Check(cudaStreamEndCapture(stream_, &graph), "cudaStreamEndCapture"); !s.ok()) {
      return s;
    }
    cudaGraphExec_t exec = nullptr;
    const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    if (auto s = Check(made, "cudaGraphInstantiate"); !s.ok()) return s;
    absl::Status status = Check(cudaGraphLaunch(exec, stream_), "cudaGraphLaunch");
    if (status.ok()) status = Barrier();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < replays && status.ok(); ++i) {
      status = Check(cudaGraphLaunch(exec, stream_), "cudaGraphLaunch");
    }
    if (status.ok()) status = Check(cudaStreamSynchronize(stream_), "sync");
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    cudaGraphExecDestroy(exec);
    if (!status.ok()) return status;
    return seconds / (static_cast<double>(replays) * ops);
  }

  absl::StatusOr<double> TimeGroupedAllReduce(absl::Span<const size_t> sizes,
                                              size_t group_bytes, int warmup,
                                              int iters) override {
    std::vector<void*> buffers;
    absl::Status status;
    for (size_t bytes : sizes) {
      void* p = nullptr;
      status = Check(cudaMalloc(&p, bytes), "cudaMalloc");
      if (!status.ok()) break;
      buffers.push_back(p);
    }
    auto call = [&]() -> absl::Status {
      ncclResult_t first = ncclSuccess;  // The first error, reported once its group ends.
      size_t in_group = 0;
      for (size_t i = 0; i < buffers.size(); ++i) {
        if (group_bytes > 0 && in_group == 0) ncclGroupStart();
        const ncclResult_t r = ncclAllReduce(buffers[i], buffers[i], sizes[i] / sizeof(float),
                                             ncclFloat32, ncclSum, comm_, stream_);
        if (first == ncclSuccess) first = r;
        in_group += sizes[i];
        if (group_bytes > 0 && (in_group >= group_bytes || i + 1 == buffers.size())) {
          in_group = 0;
          const ncclResult_t end = ncclGroupEnd();
          if (first == ncclSuccess) first = end;
        }
        if (first != ncclSuccess && in_group == 0) break;
      }
      return Check(first, group_bytes > 0 ? "grouped ncclAllReduce" : "ncclAllReduce");
    };
    for (int i = 0; i < warmup && status.ok(); ++i) status = call();
    if (status.ok()) status = Barrier();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iters && status.ok(); ++i) status = call();
    if (status.ok()) status = Check(cudaStreamSynchronize(stream_), "sync");
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (void* p : buffers) cudaFree(p);
    if (!status.ok()) return status;
    return seconds / iters;
  }

 private:
  // Waits for this rank's stream, then for every rank to get there (an all_reduce of
  // one float), as genesis's side does before it starts its clock. Without it a rank
  // timed the others' head start away: the root of a reduce, which finishes each
  // operation last, started its clock after the others had sent part of the first
  // operation, and genesis's reduce read 0.88 - 0.98 of this baseline at 4 ranks from 1
  // to 128 MiB (0.976 - 1.006 from 2 MiB with the barrier); the root of a broadcast,
  // first to finish, read the baseline slower.
  absl::Status Barrier() {
    if (auto s = Check(cudaStreamSynchronize(stream_), "sync"); !s.ok()) return s;
    if (auto s = Check(ncclAllReduce(barrier_, barrier_, 1, ncclFloat32, ncclSum, comm_, stream_),
                       "barrier");
        !s.ok()) {
      return s;
    }
    return Check(cudaStreamSynchronize(stream_), "sync");
  }

  // The event RecordEvents and TimeDriverEventRecord record, made on first use.
  absl::Status MakeEvent() {
    if (event_ != nullptr) return absl::OkStatus();
    return Check(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming),
                 "cudaEventCreateWithFlags");
  }

  absl::Status Issue(const std::string& op, size_t count) {
    float* s = static_cast<float*>(use_send_ != nullptr ? use_send_ : send_);
    float* r = static_cast<float*>(use_recv_ != nullptr ? use_recv_ : recv_);
    if (s == nullptr || r == nullptr) {
      return absl::FailedPreconditionError("the NCCL baseline has no buffers: call UseBuffers");
    }
    if (op == "all_reduce") {
      return Check(ncclAllReduce(s, s, count, ncclFloat32, ncclSum, comm_, stream_), "ncclAllReduce");
    }
    if (op == "all_gather") {
      return Check(ncclAllGather(s, r, count / size_, ncclFloat32, comm_, stream_),
                   "ncclAllGather");
    }
    if (op == "reduce_scatter") {
      return Check(ncclReduceScatter(s, r, count / size_, ncclFloat32, ncclSum, comm_, stream_),
                   "ncclReduceScatter");
    }
    if (op == "broadcast") {
      return Check(ncclBroadcast(s, s, count, ncclFloat32, 0, comm_, stream_), "ncclBroadcast");
    }
    if (op == "reduce") {
      return Check(ncclReduce(s, s, count, ncclFloat32, ncclSum, 0, comm_, stream_), "ncclReduce");
    }
    if (op == "all_to_all") {
      const size_t chunk = count / size_;
      ncclGroupStart();
      for (int p = 0; p < size_; ++p) {
        ncclSend(s + p * chunk, chunk, ncclFloat32, p, comm_, stream_);
        ncclRecv(r + p * chunk, chunk, ncclFloat32, p, comm_, stream_);
      }
      return Check(ncclGroupEnd(), "all_to_all");
    }
    if (op == "send_recv") {
      ncclGroupStart();
      ncclSend(s, count, ncclFloat32, (rank_ + 1) % size_, comm_, stream_);
      ncclRecv(r, count, ncclFloat32, (rank_ + size_ - 1) % size_, comm_, stream_);
      return Check(ncclGroupEnd(), "send_recv");
    }
    return absl::InvalidArgumentError(absl::StrCat("unknown operation ", op));
  }

  absl::Status MakeComm(Comm kind, const ncclUniqueId& id) {
    if (kind == Comm::kInitRank) {
      return Check(ncclCommInitRank(&comm_, size_, id, rank_), "ncclCommInitRank");
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(&parent_, size_, id, rank_, &config);
    if (r != ncclInProgress) {
      if (auto s = Check(r, "ncclCommInitRankConfig"); !s.ok()) return s;
    }
    if (auto s = WaitParent("ncclCommInitRankConfig"); !s.ok()) return s;
    ncclConfig_t blocking = NCCL_CONFIG_INITIALIZER;
    blocking.blocking = 1;
    r = ncclCommSplit(parent_, 0, rank_, &comm_, &blocking);
    if (r != ncclInProgress) {
      if (auto s = Check(r, "ncclCommSplit"); !s.ok()) return s;
    }
    return WaitParent("ncclCommSplit");
  }

  // Until the non-blocking parent's last call has finished: its result.
  absl::Status WaitParent(const char* call) {
    ncclResult_t state = ncclInProgress;
    while (state == ncclInProgress) {
      if (auto s = Check(ncclCommGetAsyncError(parent_, &state), call); !s.ok()) return s;
      if (state == ncclInProgress) std::this_thread::yield();
    }
    return Check(state, call);
  }

  int rank_ = 0;
  int size_ = 1;
  ncclComm_t parent_ = nullptr;  // Comm::kSplit's non-blocking communicator.
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  void* send_ = nullptr;
  void* recv_ = nullptr;
  Memory memory_ = Memory::kCudaMalloc;
  void* barrier_ = nullptr;   // Barrier's float.
  void* use_send_ = nullptr;  // UseBuffers's, when given.
  void* use_recv_ = nullptr;
  void* send_handle_ = nullptr;  // ncclCommRegister's, with kNcclRegistered.
  void* recv_handle_ = nullptr;
  ncclWindow_t window_ = nullptr;  // kNcclWindow's, over send_ and recv_.
  cudaEvent_t event_ = nullptr;
  bool record_events_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<RawNccl>> RawNccl::Create(int rank, int size, int device,
                                                         absl::Span<const char> unique_id,
                                                         size_t max_bytes, Memory memory,
                                                         Comm comm) {
  auto raw = std::make_unique<RawNcclImpl>();
  if (auto s = raw->Init(rank, size, device, unique_id, max_bytes, memory, comm); !s.ok()) {
    return s;
  }
  return std::unique_ptr<RawNccl>(std::move(raw));
}

}  // namespace genesis::benchmarks
