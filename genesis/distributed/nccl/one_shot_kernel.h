// The one-shot all_reduce kernel (one_shot_plan.h says how it works), behind a plain
// C++ header so that the NCCL communicator compiles without nvcc.
#ifndef GENESIS_DISTRIBUTED_NCCL_ONE_SHOT_KERNEL_H_
#define GENESIS_DISTRIBUTED_NCCL_ONE_SHOT_KERNEL_H_

#include <cstddef>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "genesis/core/dtype.h"
#include "genesis/distributed/nccl/one_shot_plan.h"
#include "genesis/distributed/reduce_op.h"

struct CUstream_st;

namespace genesis::distributed::nccl_backend {

struct OneShotArgs {
  // The group's symmetric window (an ncclWindow_t of NCCL 2.28) laid out as `layout`
  // says, and this rank's own bytes of it.
  void* window = nullptr;
  char* local = nullptr;
  const OneShotLayout* layout = nullptr;
  int rank = 0;
  // Host memory mapped for the device: the kernel stops waiting for its peers once it
  // is nonzero (the group failed), leaving `out` undefined.
  const volatile int* abort = nullptr;
  // `bytes` (1 to layout->max_bytes()) of `dtype` at `in`, reduced with `op` into
  // `out` (which may be `in`); any alignment of the element type.
  const void* in = nullptr;
  void* out = nullptr;
  size_t bytes = 0;
  DType dtype = DType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
};

// Queues the kernel on `stream`. InvalidArgument for a dtype and reduction it does not
// serve (OneShotReduces) or a size out of range; the launch's error otherwise.
absl::Status LaunchOneShotAllReduce(const OneShotArgs& args, CUstream_st* stream);

// What NCCL's symmetric window `window` (an ncclWindow_t) records of this process: its
// rank among the ranks its kernels reach through the window (lsa) and in the
// communicator (world). Read from the device once, when the window is made.
// FailedPrecondition when `window` is no device window of NCCL 2.28 (a communicator
// without symmetric memory support hands out its local registration instead).
struct WindowRanks {
  int lsa = -1;
  int world = -1;
};
absl::StatusOr<WindowRanks> ReadWindowRanks(void* window);

}  // namespace genesis::distributed::nccl_backend

#endif  // GENESIS_DISTRIBUTED_NCCL_ONE_SHOT_KERNEL_H_
