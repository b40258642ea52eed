// CPU-only build: fused_copy.h's launch fails; the tiling (fused_copy.cc) works.
#include "genesis/transfer/kernels/fused_copy.h"

namespace genesis::transfer::kernels {

absl::Status LaunchFusedCopy(absl::Span<const FusedCopyItem> items, CUstream_st* stream) {
  if (items.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      "genesis was built without CUDA support (CPU-only build): no fused copy kernel");
}

}  // namespace genesis::transfer::kernels
