// Storages in symmetric memory: one NCCL window (ncclCommWindowRegister with
// NCCL_WIN_COLL_SYMMETRIC) per SymmetricWindow, from which storages are carved at the
// same offsets on every rank, so that NCCL runs its symmetric kernels on them (the
// latency of small collectives; NCCL 2.27+).
//
//   GENESIS_ASSIGN_OR_RETURN(std::shared_ptr<SymmetricWindow> window,
//                            SymmetricWindow::Create(*world, 64 << 20));   // collective
//   GENESIS_ASSIGN_OR_RETURN(Storage x, window->Allocate({2048}, DType::kFloat32, stream));
//   GENESIS_ASSIGN_OR_RETURN(Work w, world->AllReduce(x, ReduceOp::kSum));
//
// NCCL registers one physical allocation per window, so a window's memory is its own
// (ncclMemAlloc), not the device pool's. Storages are carved in order, each at an offset
// aligned to NCCL_WIN_REQUIRED_ALIGNMENT (4096 bytes); space is not reused, so a window
// holds the long-lived communication buffers of a job, allocated alike on every rank
// (same sizes, same order: then each storage sits at the same offset everywhere, which
// NCCL needs). The memory and the window go when the window and every storage carved
// from it are gone. Without NVLink multicast (NVLS), NCCL 2.28's symmetric kernels serve
// all_gather and sum all_reduce / reduce_scatter of float32, float16 and bfloat16; other
// operations on window storages run NCCL's usual kernels.
#ifndef GENESIS_DISTRIBUTED_SYMMETRIC_WINDOW_H_
#define GENESIS_DISTRIBUTED_SYMMETRIC_WINDOW_H_

#include <cstddef>
#include <memory>
#include <mutex>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "genesis/core/device.h"
#include "genesis/core/dtype.h"
#include "genesis/distributed/communicator.h"
#include "genesis/distributed/process_group.h"
#include "genesis/storage/storage.h"

struct CUstream_st;

namespace genesis::distributed {

class SymmetricWindow : public std::enable_shared_from_this<SymmetricWindow> {
 public:
  // Where storages start in a window: NCCL's required alignment.
  static constexpr size_t kAlignment = 4096;

  // `bytes` (rounded up to kAlignment) of symmetric memory of `group`: collective, every
  // rank with the same size. The errors of ProcessGroup::AllocateSymmetric.
  static absl::StatusOr<std::shared_ptr<SymmetricWindow>> Create(ProcessGroup& group,
                                                                 size_t bytes);

  // A new contiguous storage of `shape` and `dtype` at the window's next free offset,
  // ordered by `stream`. InvalidArgument for a bad shape; ResourceExhausted (saying how
  // much is left) when it does not fit.
  absl::StatusOr<storage::Storage> Allocate(absl::Span<const int64_t> shape, DType dtype,
                                            CUstream_st* stream = nullptr);

  size_t bytes() const { return memory_->bytes; }
  // Bytes carved so far, alignment included.
  size_t used() const;
  Device device() const { return device_; }

 private:
  SymmetricWindow(std::shared_ptr<SymmetricMemory> memory, Device device)
      : memory_(std::move(memory)), device_(device) {}

  const std::shared_ptr<SymmetricMemory> memory_;
  const Device device_;
  mutable std::mutex mu_;
  size_t used_ = 0;  // Under mu_.
};

}  // namespace genesis::distributed

#endif  // GENESIS_DISTRIBUTED_SYMMETRIC_WINDOW_H_
