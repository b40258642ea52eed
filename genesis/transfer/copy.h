// Copying bytes between memory on any two devices: plain host, pinned host and cuda:N.
//
// This package moves bytes; it knows nothing of storages, dtypes or views (the storage
// layer builds on it). A copy is described by two pointers, the device each lives on, a
// byte count and, for CUDA, the stream that orders it:
//
//   GENESIS_RETURN_IF_ERROR(genesis::transfer::CopyBytes(
//       dst, Device::Cuda(0), src, Device::Cpu(), nbytes));
//
// CUDA pointers are those of the device they are said to live on; host pointers may be
// pageable or pinned (CUDA finds out which). Copies between two GPUs go through the
// process's batch copier (batch_copy.h): cudaMemcpyPeerAsync with peer access enabled
// once per pair, or, without peer access, double-buffered through pinned host memory.
// A copy between pageable host memory and a GPU of at least kPageableStagingMinBytes
// (1 MiB) goes through the device's shared staging pipeline (staging.h,
// SharedStagingPipeline): host threads copy through pinned buffers while the copy
// engine moves earlier chunks, several times faster than cudaMemcpy from pageable
// memory. Functions are thread-safe.
#ifndef GENESIS_TRANSFER_COPY_H_
#define GENESIS_TRANSFER_COPY_H_

#include <cstddef>

#include "absl/status/status.h"
#include "genesis/core/device.h"

// The CUDA headers' own declaration: cudaStream_t is CUstream_st*.
struct CUstream_st;

namespace genesis::transfer {

// Copies `nbytes` from `src` on `src_device` to `dst` on `dst_device` and returns once
// the bytes are at `dst`. With a CUDA side, the copy is queued on `stream` (a stream of
// the CUDA device involved, of the destination's device for a GPU-to-GPU copy; nullptr
// is the legacy default stream), after the work already queued there, and the stream
// is then synchronised. Host-to-host copies are a memcpy (`stream` is ignored).
// nbytes == 0 is a no-op. Errors, with nothing copied: InvalidArgument for a null
// pointer while nbytes > 0 or for overlapping ranges on one device (naming both);
// OutOfRange for a CUDA device that does not exist; FailedPrecondition in the CPU-only
// build when a side is a CUDA device; the CUDA error of the copy otherwise.
absl::Status CopyBytes(void* dst, Device dst_device, const void* src, Device src_device,
                       size_t nbytes, CUstream_st* stream = nullptr);

// Like CopyBytes, but returns once the copy is queued on `stream`: the bytes are at
// `dst` when the stream's work up to here has finished. The caller keeps both buffers
// alive (and `src` unchanged) until then. Host-to-host copies, and staged copies of
// pageable memory (which first wait for the work queued on `stream`), complete before
// return.
// Errors as for CopyBytes; an error of the copy itself may surface only at the next
// synchronisation of the stream.
absl::Status CopyBytesAsync(void* dst, Device dst_device, const void* src,
                            Device src_device, size_t nbytes, CUstream_st* stream);

// Blocks until the work queued on `stream` of CUDA device `device` has finished and
// returns its first error. OK at once for the CPU. Errors as for CopyBytes.
absl::Status Synchronize(Device device, CUstream_st* stream);

}  // namespace genesis::transfer

#endif  // GENESIS_TRANSFER_COPY_H_
