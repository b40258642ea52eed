// The CUDA half of copy.h, implemented per build: cuda_copy.cc calls the CUDA runtime,
// cuda_copy_nocuda.cc fails with FailedPrecondition. Arguments are validated by
// copy.cc before these are called. Not part of the public API.
#ifndef GENESIS_TRANSFER_INTERNAL_CUDA_COPY_H_
#define GENESIS_TRANSFER_INTERNAL_CUDA_COPY_H_

#include <cstddef>

#include "absl/status/status.h"
#include "genesis/core/device.h"

struct CUstream_st;

namespace genesis::transfer::internal {

// A copy where at least one side is a CUDA device (both checked to exist), queued on
// `stream`, then waited for if `synchronize`.
absl::Status CudaCopy(void* dst, Device dst_device, const void* src, Device src_device,
                      size_t nbytes, CUstream_st* stream, bool synchronize);

// cudaStreamSynchronize on `device`.
absl::Status CudaSynchronize(int device, CUstream_st* stream);

}  // namespace genesis::transfer::internal

#endif  // GENESIS_TRANSFER_INTERNAL_CUDA_COPY_H_
