// CPU-only build: fused_copy.h's launch fails; the encoding works.
#include "genesis/transfer/kernels/fused_copy.h"

namespace genesis::transfer::kernels {

absl::Status LaunchEncodedFusedCopy(const FusedCopyParams& params, CUstream_st* stream) {
  if (params.header.num_tiles == 0) return absl::OkStatus();  // Nothing to copy.
  return absl::FailedPreconditionError(
      "genesis was built without CUDA support (CPU-only build): no fused copy kernel");
}

absl::Status LaunchFusedCopy(absl::Span<const FusedCopyItem> items, CUstream_st* stream) {
  return LaunchFusedCopy(
      items.size(), [&](size_t k) -> const FusedCopyItem& { return items[k]; }, stream);
}

}  // namespace genesis::transfer::kernels
