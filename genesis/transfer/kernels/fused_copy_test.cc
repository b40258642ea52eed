#include "genesis/transfer/kernels/fused_copy.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace genesis::transfer::kernels {
namespace {

using ::testing::HasSubstr;

// What the kernel does, block by block, with memcpy for the block's bytes.
void EmulateKernel(const std::vector<FusedCopyItem>& items, const FusedCopyTiling& tiling) {
  for (uint32_t tile = 0; tile < tiling.num_tiles; ++tile) {
    const uint32_t item = ItemOfTile(tiling, tile);
    const FusedCopyItem& copy = items[item];
    const size_t begin = size_t{tile - tiling.tile_start[item]} * kFusedTileBytes;
    ASSERT_LT(begin, copy.bytes) << "tile " << tile << " of item " << item;
    const size_t n = std::min(kFusedTileBytes, copy.bytes - begin);
    std::memcpy(static_cast<char*>(copy.dst) + begin,
                static_cast<const char*>(copy.src) + begin, n);
  }
}

TEST(FusedCopyTilingTest, EveryByteOfEveryItemIsCoveredOnce) {
  std::mt19937 rng(7);
  const std::vector<size_t> sizes = {0,       1,           15,         16,  17, 4096,
                                     kFusedTileBytes - 1, kFusedTileBytes, kFusedTileBytes + 1,
                                     0,       3 * kFusedTileBytes + 5,  0};
  std::vector<std::vector<char>> src(sizes.size()), dst(sizes.size());
  std::vector<FusedCopyItem> items;
  for (size_t i = 0; i < sizes.size(); ++i) {
    src[i].resize(sizes[i] + 1);
    dst[i].assign(sizes[i] + 1, 0);
    for (char& c : src[i]) c = static_cast<char>(rng() | 1);  // Never 0.
    items.push_back({src[i].data(), dst[i].data(), sizes[i]});
  }
  auto tiling = std::make_unique<FusedCopyTiling>();
  ASSERT_TRUE(TileFusedCopy(items, *tiling).ok());
  EXPECT_EQ(tiling->num_items, items.size());
  size_t expected_tiles = 0;
  for (size_t n : sizes) expected_tiles += (n + kFusedTileBytes - 1) / kFusedTileBytes;
  EXPECT_EQ(tiling->num_tiles, expected_tiles);
  EmulateKernel(items, *tiling);
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(0, std::memcmp(src[i].data(), dst[i].data(), sizes[i])) << "item " << i;
    EXPECT_EQ(dst[i][sizes[i]], 0) << "item " << i << " written past its end";
  }
}

TEST(FusedCopyTilingTest, EmptyItemsAreSkippedByTheSearch) {
  std::vector<char> a(10, 'a'), b(10, 0);
  std::vector<FusedCopyItem> items = {{nullptr, nullptr, 0}, {nullptr, nullptr, 0},
                                      {a.data(), b.data(), 10}, {nullptr, nullptr, 0}};
  auto tiling = std::make_unique<FusedCopyTiling>();
  ASSERT_TRUE(TileFusedCopy(items, *tiling).ok());
  ASSERT_EQ(tiling->num_tiles, 1u);
  EXPECT_EQ(ItemOfTile(*tiling, 0), 2u);
}

TEST(FusedCopyTilingTest, AFullLaunchOfManySmallItems) {
  std::vector<char> src(kFusedCopiesPerLaunch * 100), dst(src.size(), 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>(i % 251 + 1);
  std::vector<FusedCopyItem> items;
  for (size_t i = 0; i < kFusedCopiesPerLaunch; ++i) {
    items.push_back({src.data() + 100 * i, dst.data() + 100 * i, 100});
  }
  auto tiling = std::make_unique<FusedCopyTiling>();
  ASSERT_TRUE(TileFusedCopy(items, *tiling).ok());
  EXPECT_EQ(tiling->num_tiles, kFusedCopiesPerLaunch);
  for (uint32_t t = 0; t < tiling->num_tiles; ++t) EXPECT_EQ(ItemOfTile(*tiling, t), t);
  EmulateKernel(items, *tiling);
  EXPECT_EQ(src, dst);
}

// The kernel's item for a tile, by the binary search alone.
uint32_t SearchedItem(FusedCopyTiling tiling, uint32_t tile) {
  tiling.tiles_per_item = 0;
  return ItemOfTile(tiling, tile);
}

TEST(FusedCopyTilingTest, EqualItemsAreFoundByDivision) {
  for (const size_t bytes : {size_t{1}, size_t{16} << 10, kFusedTileBytes,
                             kFusedTileBytes + 1, 3 * kFusedTileBytes}) {
    std::vector<FusedCopyItem> items(37, {nullptr, nullptr, bytes});
    auto tiling = std::make_unique<FusedCopyTiling>();
    ASSERT_TRUE(TileFusedCopy(items, *tiling).ok());
    const uint32_t per_item = (bytes + kFusedTileBytes - 1) / kFusedTileBytes;
    EXPECT_EQ(tiling->tiles_per_item, per_item) << bytes;
    for (uint32_t t = 0; t < tiling->num_tiles; ++t) {
      EXPECT_EQ(ItemOfTile(*tiling, t), t / per_item) << bytes << " bytes, tile " << t;
      EXPECT_EQ(ItemOfTile(*tiling, t), SearchedItem(*tiling, t)) << bytes;
    }
  }
}

TEST(FusedCopyTilingTest, UnequalOrEmptyItemsAreSearched) {
  const size_t tile = kFusedTileBytes;
  for (const std::vector<size_t>& sizes :
       {std::vector<size_t>{tile, tile, 2 * tile}, std::vector<size_t>{tile, 0, tile},
        std::vector<size_t>{0, 0}, std::vector<size_t>{}}) {
    std::vector<FusedCopyItem> items;
    for (size_t bytes : sizes) items.push_back({nullptr, nullptr, bytes});
    auto tiling = std::make_unique<FusedCopyTiling>();
    ASSERT_TRUE(TileFusedCopy(items, *tiling).ok());
    EXPECT_EQ(tiling->tiles_per_item, 0u) << sizes.size() << " items";
  }
  // Tiles still land in their items.
  std::vector<FusedCopyItem> items = {{nullptr, nullptr, tile}, {nullptr, nullptr, 0},
                                      {nullptr, nullptr, tile}};
  auto tiling = std::make_unique<FusedCopyTiling>();
  ASSERT_TRUE(TileFusedCopy(items, *tiling).ok());
  EXPECT_EQ(ItemOfTile(*tiling, 0), 0u);
  EXPECT_EQ(ItemOfTile(*tiling, 1), 2u);
}

TEST(FusedCopyTilingTest, TooManyItemsForOneLaunch) {
  std::vector<FusedCopyItem> items(kFusedCopiesPerLaunch + 1);
  auto tiling = std::make_unique<FusedCopyTiling>();
  const absl::Status status = TileFusedCopy(items, *tiling);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("1025 items"));
}

TEST(FusedCopyTilingTest, TooManyTilesForAGrid) {
  // Sizes only: nothing is copied.
  std::vector<FusedCopyItem> items = {{nullptr, nullptr, size_t{1} << 62}};
  auto tiling = std::make_unique<FusedCopyTiling>();
  const absl::Status status = TileFusedCopy(items, *tiling);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("more than a grid holds"));
}

TEST(FusedCopyTest, AnEmptyLaunchDoesNothing) {
  EXPECT_TRUE(LaunchFusedCopy({}, nullptr).ok());
}

}  // namespace
}  // namespace genesis::transfer::kernels
