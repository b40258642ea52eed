// An all_reduce whose bytes move through the GPUs' copy engines: every rank copies its
// chunks into its peers' windows (cudaMemcpyAsync between the ranks' mapped windows),
// adds the chunks it owns with a kernel, and copies its peers' sums back; flags in the
// windows, written and awaited by stream memory operations (cuStreamWriteValue32,
// cuStreamWaitValue32), order the ranks' steps (copy_engine_plan.h says how). It uses
// no SMs while bytes move, only for the additions; NCCL's kernels hold SMs for the
// whole all_reduce. Plain C++ header: the communicator compiles without nvcc.
#ifndef GENESIS_DISTRIBUTED_NCCL_COPY_ENGINE_ALL_REDUCE_H_
#define GENESIS_DISTRIBUTED_NCCL_COPY_ENGINE_ALL_REDUCE_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "genesis/core/dtype.h"
#include "genesis/distributed/nccl/copy_engine_plan.h"

struct CUstream_st;

namespace genesis::distributed::nccl_backend {

// The windows of a group as one rank reaches them.
struct CopyEngineWindows {
  const CopyEngineLayout* layout = nullptr;  // Outlives the all_reduce.
  int rank = 0;
  // Every rank's window (layout->bytes() of device memory) at the address this process
  // maps it; windows[rank] is this rank's own.
  std::array<char*, kCopyEngineMaxRanks> windows = {};
};

class CopyEngineAllReduce {
 public:
  // Zeroes this rank's flags (before it returns) and makes its streams on the current
  // device, which must hold windows[rank]. Every rank of the group must have returned
  // from Create before any rank issues an all_reduce (a barrier of the group).
  // InvalidArgument for a missing layout, window or a rank out of range; the CUDA or
  // driver error otherwise (FailedPrecondition where the driver lacks stream memory
  // operations).
  static absl::StatusOr<std::unique_ptr<CopyEngineAllReduce>> Create(
      const CopyEngineWindows& windows);

  // Waits for what it queued, then frees its streams and events.
  ~CopyEngineAllReduce();

  CopyEngineAllReduce(const CopyEngineAllReduce&) = delete;
  CopyEngineAllReduce& operator=(const CopyEngineAllReduce&) = delete;

  // Queues the sum across the ranks of `bytes` bytes of `dtype` at `data` (device memory
  // of this rank's GPU, any alignment of the element type), in place, after what `stream`
  // has queued; `stream` then waits for it. Every rank must issue the same all_reduces
  // (sizes and dtypes) in the same order; every rank gets the same bits (each chunk is
  // summed by one rank, in rank order, accumulating float16 and bfloat16 in float32).
  // InvalidArgument for a dtype and reduction CopyEngineReduces refuses or bytes that are
  // no whole number of elements; FailedPrecondition on a stream being captured (the
  // pieces' numbers differ from one all_reduce to the next, so a graph cannot replay
  // them) or after Release; the CUDA or driver error otherwise. Not thread-safe.
  absl::Status AllReduce(void* data, size_t bytes, DType dtype, ReduceOp op, CUstream_st* stream);

  // Lets every wait this rank queued, or queues later, pass, so that its streams drain
  // when a peer will never come (the group failed); what the all_reduces in flight write
  // is undefined after it, and AllReduce fails from then on. Thread-safe against
  // AllReduce.
  absl::Status Release();

  // The pieces this rank has issued (the last piece's number).
  uint32_t pieces() const { return number_.load(std::memory_order_acquire); }

 private:
  struct Streams;
  explicit CopyEngineAllReduce(const CopyEngineWindows& windows);

  CopyEngineWindows windows_;
  std::unique_ptr<Streams> streams_;
  std::atomic<uint32_t> number_{0};
};

}  // namespace genesis::distributed::nccl_backend

#endif  // GENESIS_DISTRIBUTED_NCCL_COPY_ENGINE_ALL_REDUCE_H_
