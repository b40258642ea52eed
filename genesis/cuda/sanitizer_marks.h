// Telling compute-sanitizer about writes it cannot see.
//
// initcheck reports a device read of bytes that, as far as it knows, nothing wrote. Some
// writes escape it: those of cudaMemcpyBatchAsync (CUDA 13's compute-sanitizer tracks
// none of them, from pageable or pinned sources), and those of another process into
// device memory that this one opened with cudaIpcOpenMemHandle. Each later read of such
// bytes is reported although they were written. MarkInitialized says that they were,
// through NVTX's memory API (nvtxMemCudaMarkInitialized). Without a tool attached NVTX
// makes it a check of a function pointer; in the CPU-only build it does nothing.
//
// genesis marks what it wrote or received that way: the destinations on a GPU of the
// batch copier's cudaMemcpyBatchAsync, and the memory ReceiveCudaStorage opens with
// cudaIpcOpenMemHandle. A program that writes device memory by such means itself marks
// it the same way.
//
// Only memory the tool tracks can be marked; it refuses other ranges with a warning,
// which it counts as an error: pageable host memory, and device memory mapped from
// another process's shareable handle (which it does not track, so reads of it are never
// reported). Pinned host memory is not tracked either and needs no mark.
#ifndef GENESIS_CUDA_SANITIZER_MARKS_H_
#define GENESIS_CUDA_SANITIZER_MARKS_H_

#include <cstddef>

struct CUstream_st;

namespace genesis::cuda {

// Tells an attached compute-sanitizer that [ptr, ptr + bytes) of device memory holds
// written bytes, as of the work queued on `stream` so far (null: the legacy default
// stream). Never fails; does nothing for a null `ptr` or zero `bytes`. Thread-safe.
void MarkInitialized(const void* ptr, size_t bytes, CUstream_st* stream = nullptr);

}  // namespace genesis::cuda

#endif  // GENESIS_CUDA_SANITIZER_MARKS_H_
