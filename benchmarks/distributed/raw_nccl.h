// The baseline of the collective benchmarks: NCCL called directly on cudaMalloc
// buffers, the way nccl-tests calls it, in the same process as genesis's groups; or on
// buffers from NCCL's own allocator registered with the communicator, NCCL's zero-copy
// path (nccl-tests' -R 1), or in a symmetric window (nccl-tests' -R 2).
#ifndef GENESIS_BENCHMARKS_DISTRIBUTED_RAW_NCCL_H_
#define GENESIS_BENCHMARKS_DISTRIBUTED_RAW_NCCL_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace genesis::benchmarks {

class RawNccl {
 public:
  // Where the baseline's two buffers come from.
  enum class Memory {
    kCudaMalloc,      // cudaMalloc, not registered.
    kNcclRegistered,  // ncclMemAlloc, each registered with ncclCommRegister.
    kNcclWindow,      // One ncclMemAlloc for both, one symmetric window over it
                      // (ncclCommWindowRegister), where NCCL runs its symmetric kernels.
    kExternal,        // None of its own: UseBuffers gives them before the first Time.
  };
  // How the baseline's communicator is made.
  enum class Comm {
    kInitRank,  // ncclCommInitRank, as nccl-tests makes it.
    kSplit,     // As genesis's groups make theirs: a blocking ncclCommSplit of a
                // non-blocking communicator from ncclCommInitRankConfig.
  };

  // A blocking NCCL communicator of rank `rank` of `size` on GPU `device`, made as `comm`
  // says from a unique id every rank shares, and buffers of `memory` for up to
  // `max_bytes`.
  // FailedPrecondition in a build without NCCL; NCCL's error if it refuses to allocate
  // or register.
  static absl::StatusOr<std::unique_ptr<RawNccl>> Create(int rank, int size, int device,
                                                         absl::Span<const char> unique_id,
                                                         size_t max_bytes,
                                                         Memory memory = Memory::kCudaMalloc,
                                                         Comm comm = Comm::kInitRank);
  virtual ~RawNccl() = default;

  // Seconds per operation of `op` ("all_reduce", "all_gather", "reduce_scatter",
  // "broadcast", "reduce", "all_to_all", "send_recv") on `bytes` (float32 elements; the
  // whole buffer for all_gather and reduce_scatter), averaged over `iters` back-to-back
  // operations after `warmup`.
  virtual absl::StatusOr<double> Time(const std::string& op, size_t bytes, int warmup,
                                      int iters) = 0;

  // With `on`, each operation Time issues is followed by a cudaEventRecord on the stream
  // (one reused event without timing), as genesis's groups record one per operation they
  // track: the event's own cost, on the host and on the GPU, is then in both rows.
  virtual absl::Status RecordEvents(bool on) = 0;

  // From now on the operations Time issues work on `send` and `recv` (each of the
  // `max_bytes` given to Create at least, on this object's device, alive as long as it
  // is) instead of this object's buffers: the baseline on another allocator's memory.
  virtual void UseBuffers(void* send, void* recv) = 0;

  // Seconds per cuEventRecord, the driver's call reached through
  // cudaGetDriverEntryPointByVersion (no runtime layer), of `calls` on this object's
  // stream.
  virtual absl::StatusOr<double> TimeDriverEventRecord(int calls) = 0;

  // Seconds per cuStreamWriteValue64 of `calls` on this object's stream, each writing a
  // counter into mapped host memory: the other way to mark a point in a stream, which a
  // host thread could read without a driver call. An error if the host does not see
  // the last value after a synchronize.
  virtual absl::StatusOr<double> TimeDriverStreamWrite(int calls) = 0;

  // Seconds per operation of `op` on `bytes` when `ops` of them are captured into one
  // CUDA graph that is replayed `replays` times (after one replay of warm-up).
  virtual absl::StatusOr<double> TimeGraph(const std::string& op, size_t bytes, int ops,
                                           int replays) = 0;
  // Seconds per call of in-place all_reduces of float32 buffers of `sizes` bytes, each a
  // cudaMalloc of its own, issued in NCCL groups (ncclGroupStart/End) of consecutive
  // buffers that close once they hold `group_bytes` or more (0: no groups, one
  // all_reduce at a time), averaged over `iters` calls after `warmup`.
  virtual absl::StatusOr<double> TimeGroupedAllReduce(absl::Span<const size_t> sizes,
                                                      size_t group_bytes, int warmup,
                                                      int iters) = 0;
};

}  // namespace genesis::benchmarks

#endif  // GENESIS_BENCHMARKS_DISTRIBUTED_RAW_NCCL_H_
