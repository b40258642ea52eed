// The one-shot collectives' kernel (one_shot_plan.h says how it works), behind a plain
// C++ header so that the NCCL communicator compiles without nvcc.
#ifndef GENESIS_DISTRIBUTED_NCCL_ONE_SHOT_KERNEL_H_
#define GENESIS_DISTRIBUTED_NCCL_ONE_SHOT_KERNEL_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "genesis/core/dtype.h"
#include "genesis/distributed/nccl/one_shot_plan.h"
#include "genesis/distributed/reduce_op.h"

struct CUstream_st;

namespace genesis::distributed::nccl_backend {

// What every launch needs of its group.
struct OneShotWindow {
  // The group's symmetric window (an ncclWindow_t of NCCL 2.28) laid out as `layout`
  // says, and this rank's own bytes of it.
  void* window = nullptr;
  char* local = nullptr;
  const OneShotLayout* layout = nullptr;
  int rank = 0;
  // Host memory mapped for the device: a kernel stops waiting for its peers once it is
  // nonzero (the group failed), leaving what it writes undefined.
  const volatile int* abort = nullptr;
};

struct OneShotArgs : OneShotWindow {
  // `kind` on `piece` bytes of `dtype` (one_shot_plan.h): `in` holds ranks x piece
  // bytes for reduce_scatter, `out` for all_gather, both for all_to_all, and both hold
  // `piece` bytes for the others. They may be the same buffer, and `out` may be a part
  // of `in` or `in` of `out` where each thread's bytes stay its own (the rank's part of
  // reduce_scatter's input or all_gather's output). Any alignment of the element type.
  // `root`: reduce's and broadcast's.
  OneShotKind kind = OneShotKind::kAllReduce;
  const void* in = nullptr;
  void* out = nullptr;
  size_t piece = 0;
  DType dtype = DType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int root = 0;
};

// Queues the kernel on `stream`. InvalidArgument for a dtype and reduction it does not
// serve (OneShotReduces), a piece of 0 bytes or more than the window holds
// (OneShotLayout::max_piece, or MaxPiece where that is more: all_reduce and broadcast
// in two steps) or a root out of range; the launch's error otherwise.
absl::Status LaunchOneShot(const OneShotArgs& args, CUstream_st* stream);

// One send or receive of a batch (LaunchOneShotPeers): `bytes` (1 to the layout's
// max_message()) from or into `data`, any alignment.
struct OneShotMessage {
  bool send = true;
  int peer = 0;
  void* data = nullptr;
  size_t bytes = 0;
};

// The messages of one launch: at most one send to and one receive from each peer
// (other than `rank`); OneShotPeerRounds (one_shot_plan.h) splits a batch into such
// launches.
struct OneShotPeerArgs : OneShotWindow {
  absl::Span<const OneShotMessage> messages;
};

// Queues the messages of `args` on `stream`, one kernel: each receive waits for its
// message; the k-th send to a peer waits until the peer took the (k - 2)-th
// (one_shot_plan.h). Messages match as NCCL's do: the k-th send from p to q with the
// k-th receive of q from p, and both must have the same size. InvalidArgument for an
// empty launch, a peer out of range or this rank, two sends to (or receives from) one
// peer, or a size the layout does not serve; the launch's error otherwise.
absl::Status LaunchOneShotPeers(const OneShotPeerArgs& args, CUstream_st* stream);

// What NCCL's symmetric window `window` (an ncclWindow_t) records of this process: its
// rank among the ranks its kernels reach through the window (lsa) and in the
// communicator (world), and where each lsa rank's bytes of it lie in this process
// (Peer: NCCL's ncclGetLsaPointer). Read from the device once, when the window is made.
// FailedPrecondition when `window` is no device window of NCCL 2.28 (a communicator
// without symmetric memory support hands out its local registration instead).
struct WindowRanks {
  int lsa = -1;
  int world = -1;
  char* lsa_base = nullptr;  // Lsa rank 0's bytes.
  uint32_t stride4g = 0;     // From one lsa rank's bytes to the next, in units of 4 GiB.

  char* Peer(int lsa_rank) const {
    return lsa_base + static_cast<size_t>(lsa_rank) * (static_cast<size_t>(stride4g) << 32);
  }
};
absl::StatusOr<WindowRanks> ReadWindowRanks(void* window);

}  // namespace genesis::distributed::nccl_backend

#endif  // GENESIS_DISTRIBUTED_NCCL_ONE_SHOT_KERNEL_H_
