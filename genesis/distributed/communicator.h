// Communicator: the interface a collectives backend implements (NCCL for GPU memory,
// Gloo for CPU memory), over plain buffers.
//
// It moves and reduces bytes and knows nothing of storages: ProcessGroup
// (process_group.h) checks storages, turns them into Buffers and keeps them alive.
// Arguments reach a communicator already checked (sizes agree, ranks in range, the
// reduction supported: SupportsReduction), so a backend only reports what fails in
// flight. Every operation is queued and returns a Work; a failed operation makes the
// communicator unusable (health() says why) and every later call fails at once with
// FailedPrecondition.
#ifndef GENESIS_DISTRIBUTED_COMMUNICATOR_H_
#define GENESIS_DISTRIBUTED_COMMUNICATOR_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "genesis/core/device.h"
#include "genesis/core/dtype.h"
#include "genesis/distributed/reduce_op.h"
#include "genesis/distributed/registration_policy.h"
#include "genesis/distributed/work.h"

struct CUstream_st;

namespace genesis::distributed {

// Operations in which a rank sends up to this many bytes take NCCL groups' one-shot path
// by default (GroupInfo::nccl_one_shot_bytes; nccl/one_shot_plan.h's MaxPiece): an
// all_gather's output of up to 8 MiB at 2 ranks, 5.3 MiB at 4, 4.6 MiB at 8 (as much
// for reduce_scatter's and all_to_all's input); an all_reduce or broadcast of up to
// 4 MiB, 2.7 MiB, 2.3 MiB (in two steps beyond 2 ranks); a reduce of up to 4 MiB,
// 683 KiB, 146 KiB; sends of up to 1 MiB. On four H200s that kept the path where it was
// ahead of NCCL (docs/distributed.md, "One-shot collectives").
inline constexpr size_t kDefaultNcclOneShotBytes = size_t{4} << 20;

// Who a communicator is, for error messages and reports.
struct GroupInfo {
  std::string name = "world";
  std::string backend;  // "gloo" or "nccl"
  int rank = 0;
  int size = 1;
  Device device = Device::Cpu();
  // An operation not finished after this long fails, and the group with it.
  absl::Duration timeout = absl::Minutes(10);
  // NCCL only: operations run on a blocking communicator (nccl/nccl_communicator.h says
  // what it trades).
  bool nccl_blocking = true;
  // NCCL only: which operations run on buffers registered with NCCL
  // (registration_policy.h, nccl/nccl_communicator.h).
  NcclRegistration nccl_registration = NcclRegistration::kAuto;
  // NCCL only: the other ranks may be another NCCL client (PyTorch, CuPy) that made the
  // id: one ncclCommInitRank per rank and nothing more (no blocking copy made by
  // ncclCommSplit, which the other client would never join).
  bool nccl_interop = false;
  // NCCL only: all_reduce, reduce, broadcast, all_gather, reduce_scatter, all_to_all
  // and sends and receives in which a rank sends up to this many bytes (a collective's
  // piece times ranks - 1; all_reduce's and broadcast's pieces may be ranks / 2 times
  // as large, reduce's 2 / ranks as large: nccl/one_shot_plan.h's MaxPiece; a message,
  // up to 1 MiB) run genesis's one-shot kernel over a symmetric window instead of
  // NCCL's (nccl/nccl_communicator.h); 0: none.
  size_t nccl_one_shot_bytes = kDefaultNcclOneShotBytes;
  // NCCL only: all_reduces (sums of float16, bfloat16, float32, float64) of at least
  // this many bytes move their bytes through the GPUs' copy engines between the ranks'
  // symmetric windows, and add them with a kernel of genesis's own
  // (nccl/copy_engine_all_reduce.h), where the same conditions as the one-shot path's
  // hold; 0: none.
  size_t nccl_copy_engine_bytes = 0;

  // "gloo group 'world' (rank 1 of 4)".
  std::string Describe() const;
};

// `count` elements of `dtype` at `data`. GPU buffers: `stream` orders the operation.
struct Buffer {
  void* data = nullptr;
  size_t count = 0;
  DType dtype = DType::kFloat32;
  CUstream_st* stream = nullptr;

  size_t bytes() const { return count * ItemSize(dtype); }
};

// One half of a point-to-point transfer; a batch of them forms one group (SendRecv).
struct PeerOp {
  enum class Kind { kSend, kRecv };
  Kind kind = Kind::kSend;
  Buffer buffer;
  int peer = 0;
  // Matches a send with a receive between the same two ranks (Gloo; NCCL matches by
  // order). 0 <= tag < 2^31.
  int tag = 0;
};

// Device memory registered with every rank of a group as one symmetric window (NCCL's
// symmetric memory, ncclCommWindowRegister): NCCL's symmetric kernels serve collectives
// on buffers inside it when every rank's buffer is at the same offset. Dropping the
// last reference deregisters the window (on this rank alone) and frees the memory.
struct SymmetricMemory {
  virtual ~SymmetricMemory() = default;
  void* data = nullptr;
  size_t bytes = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual const GroupInfo& info() const = 0;
  // OK while usable; otherwise the error that made it unusable.
  virtual absl::Status health() const = 0;
  // OK if this backend reduces `dtype` with `op`; InvalidArgument naming both otherwise.
  virtual absl::Status SupportsReduction(DType dtype, ReduceOp op) const = 0;

  // In place: every rank's buffer ends as the reduction of all of them.
  virtual absl::StatusOr<Work> AllReduce(const Buffer& buffer, ReduceOp op) = 0;
  // In place: every rank's buffer ends as root's.
  virtual absl::StatusOr<Work> Broadcast(const Buffer& buffer, int root) = 0;
  // In place: root's buffer ends as the reduction; the others' are unchanged.
  virtual absl::StatusOr<Work> Reduce(const Buffer& buffer, int root, ReduceOp op) = 0;
  // output (size x input.count) holds every rank's input, in rank order.
  virtual absl::StatusOr<Work> AllGather(const Buffer& input, const Buffer& output) = 0;
  // input (size x output.count): output ends as the reduction of every rank's chunk
  // number `rank`.
  virtual absl::StatusOr<Work> ReduceScatter(const Buffer& input, const Buffer& output,
                                             ReduceOp op) = 0;
  // input and output of size x n: chunk j of input goes to rank j, and chunk i of
  // output comes from rank i.
  virtual absl::StatusOr<Work> AllToAll(const Buffer& input, const Buffer& output) = 0;
  // All sends and receives as one group: none waits for another to be posted.
  virtual absl::StatusOr<Work> SendRecv(absl::Span<const PeerOp> ops) = 0;
  virtual absl::StatusOr<Work> Barrier() = 0;

  // A communicator for the ranks in `ranks` (ascending, distinct, of this group),
  // called by every rank of this group with the same arguments. Members get a
  // communicator whose rank is their index in `ranks`; the others get nullptr.
  virtual absl::StatusOr<std::unique_ptr<Communicator>> Split(absl::Span<const int> ranks,
                                                              const std::string& name) = 0;

  // Makes the communicator unusable with `why`: pending operations fail, nothing waits
  // for peers any more.
  virtual void Abort(const absl::Status& why) = 0;

  // `bytes` of new device memory registered as a symmetric window on every rank:
  // collective (every rank calls it with the same size; the registration itself waits
  // for all of them). Unimplemented for backends without symmetric memory (Gloo).
  virtual absl::StatusOr<std::shared_ptr<SymmetricMemory>> AllocateSymmetric(size_t bytes) {
    (void)bytes;
    return absl::UnimplementedError(
        absl::StrCat("symmetric memory needs an NCCL group; ", info().Describe(), " is ",
                     info().backend));
  }
};

}  // namespace genesis::distributed

#endif  // GENESIS_DISTRIBUTED_COMMUNICATOR_H_
