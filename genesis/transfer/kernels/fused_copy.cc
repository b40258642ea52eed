#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "genesis/transfer/kernels/fused_copy.h"

namespace genesis::transfer::kernels {

absl::Status TileFusedCopy(absl::Span<const FusedCopyItem> items, FusedCopyTiling& tiling) {
  if (items.size() > kFusedCopiesPerLaunch) {
    return absl::InvalidArgumentError(absl::StrCat("fused copy: ", items.size(),
                                                   " items in one launch, at most ",
                                                   kFusedCopiesPerLaunch));
  }
  uint64_t tiles = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    tiling.tile_start[i] = static_cast<uint32_t>(tiles);
    tiles += (items[i].bytes + kFusedTileBytes - 1) / kFusedTileBytes;
    if (tiles > std::numeric_limits<int32_t>::max()) {
      return absl::InvalidArgumentError(
          absl::StrCat("fused copy: ", tiles, " tiles of ", kFusedTileBytes,
                       " bytes by item ", i, ", more than a grid holds"));
    }
  }
  tiling.tile_start[items.size()] = static_cast<uint32_t>(tiles);
  tiling.num_items = static_cast<uint32_t>(items.size());
  tiling.num_tiles = static_cast<uint32_t>(tiles);
  return absl::OkStatus();
}

}  // namespace genesis::transfer::kernels
