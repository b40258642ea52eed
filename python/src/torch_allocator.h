// The C ABI through which PyTorch draws CUDA memory from genesis's device pools:
// torch.cuda.memory.CUDAPluggableAllocator (the whole process) and torch.cuda.MemPool
// (one region of a program) call these functions, which genesis.torch installs. They
// live in the extension module genesis._genesis, so PyTorch's allocations and genesis's
// storages share one pool per device, and genesis's statistics and profiler see both.
//
// PyTorch calls malloc with the stream the tensor is made on and free with that same
// stream (the allocation's, not the last user's); work of other streams is made known
// through record_stream, which the pool's stream ordering honours (a block is reused on
// another stream only after that work has finished).
#ifndef GENESIS_PYTHON_SRC_TORCH_ALLOCATOR_H_
#define GENESIS_PYTHON_SRC_TORCH_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <functional>

#include "absl/status/statusor.h"
#include "genesis/memory/caching_allocator.h"

namespace genesis::python {

// Where the functions below get the pool of CUDA device `device`: memory::PoolFor by
// default; tests point them at pools of a TestBackend. An empty function restores the
// default. Not to be called while other threads allocate.
using TorchPoolProvider = std::function<absl::StatusOr<memory::CachingAllocator*>(int device)>;
void SetTorchPoolProvider(TorchPoolProvider provider);

}  // namespace genesis::python

extern "C" {

// PyTorch's alloc_fn: `size` bytes on CUDA device `device`, usable by work on `stream`
// (a cudaStream_t) at once; nullptr for size 0. When the pool cannot serve, throws
// std::runtime_error carrying the pool's out-of-memory report (PyTorch raises it as a
// RuntimeError with that message; it cannot become torch.OutOfMemoryError without
// linking PyTorch's c10).
void* genesis_torch_malloc(size_t size, int device, void* stream);

// PyTorch's free_fn: returns `ptr` to its pool (reused on its stream at once, on others
// after their recorded work). Never throws: a pointer genesis did not hand out is
// counted and reported by genesis_torch_error_count / genesis_torch_last_error.
void genesis_torch_free(void* ptr, size_t size, int device, void* stream);

// PyTorch's record_stream hook: work on `stream` uses `ptr`. Never throws; errors are
// counted as for free.
void genesis_torch_record_stream(void* ptr, void* stream);

// PyTorch's reset hook (torch.cuda.empty_cache()): every device pool the functions
// above used returns its unused memory to the GPU.
void genesis_torch_empty_cache();

// PyTorch's memory-fraction hook (torch.cuda.set_per_process_memory_fraction): the pool
// of `device` reserves at most `fraction` of the GPU. Only before that pool is made;
// after, throws std::runtime_error saying so (pools are configured when made).
void genesis_torch_set_memory_fraction(double fraction, int device);

// Errors that free and record_stream could not raise: how many so far, and the last
// one's message ("" if none; valid until the next error).
int64_t genesis_torch_error_count();
const char* genesis_torch_last_error();

}  // extern "C"

#endif  // GENESIS_PYTHON_SRC_TORCH_ALLOCATOR_H_
