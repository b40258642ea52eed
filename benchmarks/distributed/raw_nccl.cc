#include "benchmarks/distributed/raw_nccl.h"

#include <chrono>
#include <cstring>
#include <vector>

#include <cuda_runtime_api.h>
#include <nccl.h>

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
    if (send_handle_ != nullptr) ncclCommDeregister(comm_, send_handle_);
    if (recv_handle_ != nullptr) ncclCommDeregister(comm_, recv_handle_);
    if (comm_ != nullptr) ncclCommDestroy(comm_);
    for (void* p : {send_, recv_}) {
      if (p == nullptr) continue;
      if (memory_ == Memory::kNcclRegistered) {
        ncclMemFree(p);
      } else {
        cudaFree(p);
      }
    }
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    if (event_ != nullptr) cudaEventDestroy(event_);
  }

  absl::Status RecordEvents(bool on) override {
    if (on) {
      if (auto s = MakeEvent(); !s.ok()) return s;
    }
    record_events_ = on;
    return absl::OkStatus();
  }

  absl::Status Init(int rank, int size, int device, absl::Span<const char> id_bytes,
                    size_t max_bytes, Memory memory) {
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
    if (memory == Memory::kNcclRegistered) {
      if (auto s = Check(ncclMemAlloc(&send_, max_bytes), "ncclMemAlloc"); !s.ok()) return s;
      if (auto s = Check(ncclMemAlloc(&recv_, max_bytes), "ncclMemAlloc"); !s.ok()) return s;
    } else {
      if (auto s = Check(cudaMalloc(&send_, max_bytes), "cudaMalloc"); !s.ok()) return s;
      if (auto s = Check(cudaMalloc(&recv_, max_bytes), "cudaMalloc"); !s.ok()) return s;
    }
    if (auto s = Check(ncclCommInitRank(&comm_, size, id, rank), "ncclCommInitRank"); !s.ok()) {
      return s;
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
    if (auto s = Check(cudaStreamSynchronize(stream_), "sync"); !s.ok()) return s;
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
    if (status.ok()) status = Check(cudaStreamSynchronize(stream_), "sync");
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
    if (status.ok()) status = Check(cudaStreamSynchronize(stream_), "sync");
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
  // The event RecordEvents and TimeDriverEventRecord record, made on first use.
  absl::Status MakeEvent() {
    if (event_ != nullptr) return absl::OkStatus();
    return Check(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming),
                 "cudaEventCreateWithFlags");
  }

  absl::Status Issue(const std::string& op, size_t count) {
    float* s = static_cast<float*>(send_);
    float* r = static_cast<float*>(recv_);
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

  int rank_ = 0;
  int size_ = 1;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  void* send_ = nullptr;
  void* recv_ = nullptr;
  Memory memory_ = Memory::kCudaMalloc;
  void* send_handle_ = nullptr;  // ncclCommRegister's, with kNcclRegistered.
  void* recv_handle_ = nullptr;
  cudaEvent_t event_ = nullptr;
  bool record_events_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<RawNccl>> RawNccl::Create(int rank, int size, int device,
                                                         absl::Span<const char> unique_id,
                                                         size_t max_bytes, Memory memory) {
  auto raw = std::make_unique<RawNcclImpl>();
  if (auto s = raw->Init(rank, size, device, unique_id, max_bytes, memory); !s.ok()) return s;
  return std::unique_ptr<RawNccl>(std::move(raw));
}

}  // namespace genesis::benchmarks
