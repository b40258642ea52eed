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
  // Every item's tile count, while they are all equal; 0 once two differ.
  uint64_t uniform =
      items.empty() ? 0 : (items[0].bytes + kFusedTileBytes - 1) / kFusedTileBytes;
  for (size_t i = 0; i < items.size(); ++i) {
    tiling.tile_start[i] = static_cast<uint32_t>(tiles);
    const uint64_t item_tiles = (items[i].bytes + kFusedTileBytes - 1) / kFusedTileBytes;
    if (item_tiles != uniform) uniform = 0;
    tiles += item_tiles;
    if (tiles > std::numeric_limits<int32_t>::max()) {
      return absl::InvalidArgumentError(
          absl::StrCat("fused copy: ", tiles, " tiles of ", kFusedTileBytes,
                       " bytes by item ", i, ", more than a grid holds"));
    }
  }
  tiling.tile_start[items.size()] = static_cast<uint32_t>(tiles);
  tiling.num_items = static_cast<uint32_t>(items.size());
  tiling.num_tiles = static_cast<uint32_t>(tiles);
  // At most num_tiles, which fits (checked above).
  tiling.tiles_per_item = static_cast<uint32_t>(uniform);
  return absl::OkStatus();
}

}  // namespace genesis::transfer::kernels
