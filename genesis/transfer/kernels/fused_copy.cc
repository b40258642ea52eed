// The host side of fused_copy.h that is no template (both builds).
#include <algorithm>
#include <cstdint>
#include <memory>

#include "absl/strings/str_cat.h"
#include "genesis/transfer/kernels/fused_copy.h"

namespace genesis::transfer::kernels {
namespace internal {

uint32_t AlignmentShift(uint64_t address_bits) {
  if (address_bits == 0) return 0;
  return std::min<uint32_t>(static_cast<uint32_t>(__builtin_ctzll(address_bits)), 31);
}

absl::Status TooManyTiles(uint64_t tiles, uint32_t item) {
  return absl::InvalidArgumentError(absl::StrCat("fused copy: ", tiles, " tiles of ",
                                                 kFusedTileBytes, " bytes by item ", item,
                                                 ", more than a grid holds"));
}

}  // namespace internal

FusedCopyParams& ThreadFusedCopyParams() {
  thread_local const std::unique_ptr<FusedCopyParams> params =
      std::make_unique<FusedCopyParams>();
  return *params;
}

}  // namespace genesis::transfer::kernels
