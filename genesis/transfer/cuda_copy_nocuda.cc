// CPU-only implementation of internal/cuda_copy.h. copy.cc checks the CUDA device first,
// which already fails in this build; these are the fallback if it did not.
#include "absl/strings/str_cat.h"
#include "genesis/transfer/internal/cuda_copy.h"

namespace genesis::transfer::internal {

absl::Status CudaCopy(void* dst, Device dst_device, const void* src, Device src_device,
                      size_t nbytes, CUstream_st* stream, bool synchronize) {
  return absl::FailedPreconditionError(absl::StrCat(
      "genesis was built without CUDA support (CPU-only build); cannot copy from ",
      src_device.ToString(), " to ", dst_device.ToString()));
}

absl::Status CudaSynchronize(int device, CUstream_st* stream) {
  return absl::FailedPreconditionError(absl::StrCat(
      "genesis was built without CUDA support (CPU-only build); cannot synchronise cuda:",
      device));
}

}  // namespace genesis::transfer::internal
