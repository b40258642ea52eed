#include "genesis/transfer/kernels/fused_copy.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace genesis::transfer::kernels {
namespace {

using ::testing::HasSubstr;

struct Encoded {
  std::unique_ptr<FusedCopyParams> params = std::make_unique<FusedCopyParams>();
  const FusedCopyHeader& header() const { return params->header; }
  const uint32_t* words() const { return params->words; }
};

absl::Status EncodeItems(const std::vector<FusedCopyItem>& items, FusedCopyParams& params) {
  return EncodeFusedCopy(
      items.size(), [&](size_t k) -> const FusedCopyItem& { return items[k]; }, params);
}

// Encodes `items` (at most one launch's worth) as LaunchFusedCopy does.
Encoded Encode(const std::vector<FusedCopyItem>& items) {
  Encoded e;
  // Poisoned: a word read that was not written shows.
  std::fill(e.params->words, e.params->words + kFusedMaxWords, 0xDEADBEEF);
  EXPECT_TRUE(EncodeItems(items, *e.params).ok());
  return e;
}

// What the kernel does, block by block, with memcpy for the block's bytes.
void EmulateKernel(const Encoded& e) {
  for (uint32_t tile = 0; tile < e.header().num_tiles; ++tile) {
    const FusedTile t = DecodeFusedTile(e.header(), e.words(), tile);
    ASSERT_GT(t.bytes, 0u) << "tile " << tile;
    ASSERT_LE(t.bytes, kFusedTileBytes) << "tile " << tile;
    std::memcpy(reinterpret_cast<void*>(t.dst), reinterpret_cast<const void*>(t.src), t.bytes);
  }
}

// Without touching memory: the tiles cover each item's destination exactly once, in
// order, each reading the same offset of the item's source.
void ExpectTilesCoverItems(const std::vector<FusedCopyItem>& items, const Encoded& e) {
  ASSERT_LE(e.header().num_words, kFusedMaxWords);
  std::map<uint64_t, size_t> item_of_dst;  // Destination start -> item (bytes > 0 only).
  uint64_t expected_tiles = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].bytes > 0) item_of_dst[reinterpret_cast<uintptr_t>(items[i].dst)] = i;
    expected_tiles += (items[i].bytes + kFusedTileBytes - 1) / kFusedTileBytes;
  }
  ASSERT_EQ(e.header().num_tiles, expected_tiles);
  std::vector<uint64_t> covered(items.size(), 0);
  for (uint32_t tile = 0; tile < e.header().num_tiles; ++tile) {
    const FusedTile t = DecodeFusedTile(e.header(), e.words(), tile);
    auto it = item_of_dst.upper_bound(t.dst);
    ASSERT_NE(it, item_of_dst.begin()) << "tile " << tile;
    --it;
    const size_t i = it->second;
    const FusedCopyItem& item = items[i];
    const uint64_t offset = t.dst - reinterpret_cast<uintptr_t>(item.dst);
    ASSERT_EQ(offset, covered[i]) << "tile " << tile << " of item " << i;
    ASSERT_EQ(t.src - reinterpret_cast<uintptr_t>(item.src), offset) << "tile " << tile;
    ASSERT_EQ(t.bytes, std::min<uint64_t>(kFusedTileBytes, item.bytes - offset));
    covered[i] += t.bytes;
  }
  for (size_t i = 0; i < items.size(); ++i) EXPECT_EQ(covered[i], items[i].bytes) << i;
}

void* At(uint64_t address) { return reinterpret_cast<void*>(address); }

TEST(FusedCopyEncodingTest, EveryByteOfEveryItemIsCopiedOnce) {
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
  const Encoded e = Encode(items);
  EXPECT_EQ(e.header().num_items, items.size());
  EXPECT_EQ(e.header().tiles_per_item, 0u);  // Unequal tile counts: searched.
  ExpectTilesCoverItems(items, e);
  EmulateKernel(e);
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(0, std::memcmp(src[i].data(), dst[i].data(), sizes[i])) << "item " << i;
    EXPECT_EQ(dst[i][sizes[i]], 0) << "item " << i << " written past its end";
  }
}

TEST(FusedCopyEncodingTest, ConsecutiveCopiesOfOneSizeTakeNoWords) {
  // A gather into, or scatter from, one buffer: 1,024 x 16 KiB, both sides at a stride.
  std::vector<FusedCopyItem> items;
  for (uint64_t i = 0; i < kFusedCopiesPerLaunch; ++i) {
    items.push_back({At(0x7f0000000000 + i * 16384), At(0x7e0000000000 + i * 16384), 16384});
  }
  const Encoded e = Encode(items);
  EXPECT_EQ(e.header().num_words, 0u);
  EXPECT_EQ(e.header().src_mode, kFusedSame);
  EXPECT_EQ(e.header().dst_mode, kFusedSame);
  EXPECT_EQ(e.header().size_mode, kFusedSame);
  EXPECT_EQ(e.header().tiles_per_item, 1u);
  ExpectTilesCoverItems(items, e);
  // Strides that go down, and one of zero (every copy from one source).
  for (FusedCopyItem& item : items) {
    item.src = At(0x7f0000000000 - reinterpret_cast<uintptr_t>(item.src) % 0x10000000);
  }
  std::reverse(items.begin(), items.end());
  ExpectTilesCoverItems(items, Encode(items));
  for (FusedCopyItem& item : items) item.src = At(0x7f0000000000);
  const Encoded same_source = Encode(items);
  EXPECT_EQ(same_source.header().src_mode, kFusedSame);
  ExpectTilesCoverItems(items, same_source);
}

TEST(FusedCopyEncodingTest, ScatteredAddressesAsWordsAboveTheirAlignment) {
  std::mt19937 rng(1);
  std::vector<uint64_t> slots(kFusedCopiesPerLaunch);
  for (size_t i = 0; i < slots.size(); ++i) slots[i] = i;
  std::shuffle(slots.begin(), slots.end(), rng);
  std::vector<FusedCopyItem> items;
  for (uint64_t i = 0; i < kFusedCopiesPerLaunch; ++i) {
    // Sources 512-byte aligned over 32 GiB: 32-bit words of (address - lowest) >> 9.
    items.push_back({At(0x10000000000 + slots[i] * (uint64_t{32} << 20)),
                     At(0x20000000000 + i * 4096), 4096});
  }
  Encoded e = Encode(items);
  EXPECT_EQ(e.header().src_mode, kFusedWords32);
  EXPECT_GE(e.header().src_shift, 9u);
  EXPECT_EQ(e.header().dst_mode, kFusedSame);
  EXPECT_EQ(e.header().num_words, kFusedCopiesPerLaunch);
  ExpectTilesCoverItems(items, e);
  // 16 bytes off: the shift drops to 4, and 32 GiB >> 4 still fits 32 bits.
  items[5].src = static_cast<const char*>(items[5].src) + 16;
  e = Encode(items);
  EXPECT_EQ(e.header().src_mode, kFusedWords32);
  EXPECT_EQ(e.header().src_shift, 4u);
  ExpectTilesCoverItems(items, e);
  // One byte off: shift 0, and 32 GiB needs 64-bit words.
  items[5].src = static_cast<const char*>(items[5].src) - 15;
  e = Encode(items);
  EXPECT_EQ(e.header().src_mode, kFusedWords64);
  EXPECT_EQ(e.header().num_words, 2 * kFusedCopiesPerLaunch);
  ExpectTilesCoverItems(items, e);
  // Odd addresses within 4 GiB: shift 0, still 32-bit.
  for (uint64_t i = 0; i < kFusedCopiesPerLaunch; ++i) {
    items[i].src = At(0x30000000001 + slots[i] * 4099);
  }
  e = Encode(items);
  EXPECT_EQ(e.header().src_mode, kFusedWords32);
  EXPECT_EQ(e.header().src_shift, 0u);
  ExpectTilesCoverItems(items, e);
}

// Copies of `sizes` laid out one after another on both sides (fake addresses).
std::vector<FusedCopyItem> Consecutive(const std::vector<uint64_t>& sizes) {
  std::vector<FusedCopyItem> items;
  uint64_t src = 0x100000000, dst = uint64_t{1} << 44;
  for (uint64_t bytes : sizes) {
    items.push_back({At(src), At(dst), bytes});
    src += bytes;
    dst += bytes;
  }
  return items;
}

TEST(FusedCopyEncodingTest, SizesOfOneTileCountAreDividedOthersSearched) {
  std::vector<uint64_t> sizes;
  for (uint64_t i = 0; i < 100; ++i) sizes.push_back(1 + (i * 7919) % kFusedTileBytes);
  Encoded e = Encode(Consecutive(sizes));  // One tile each.
  EXPECT_EQ(e.header().size_mode, kFusedWords32);
  EXPECT_EQ(e.header().tiles_per_item, 1u);
  EXPECT_EQ(e.header().num_words, 3 * 100u);  // Sources, destinations, sizes.
  ExpectTilesCoverItems(Consecutive(sizes), e);
  sizes[40] = 2 * kFusedTileBytes + 3;
  e = Encode(Consecutive(sizes));
  EXPECT_EQ(e.header().tiles_per_item, 0u);
  EXPECT_EQ(e.header().num_words, 4 * 100u + 1);  // And the first tiles.
  ExpectTilesCoverItems(Consecutive(sizes), e);
  // Sizes of 4 GiB or more take two words each (fake addresses: nothing is copied).
  sizes[41] = (uint64_t{5} << 30) + 1;
  e = Encode(Consecutive(sizes));
  EXPECT_EQ(e.header().size_mode, kFusedWords64);
  ExpectTilesCoverItems(Consecutive(sizes), e);
}

TEST(FusedCopyEncodingTest, RandomBatchesAreCoveredExactly) {
  std::mt19937_64 rng(5);
  for (int round = 0; round < 300; ++round) {
    SCOPED_TRACE(round);
    const size_t n = 1 + rng() % kFusedCopiesPerLaunch;
    const bool one_size = rng() % 2 == 0;
    const uint64_t size = 1 + rng() % (3 * kFusedTileBytes);
    const uint64_t align = uint64_t{1} << (rng() % 12);
    std::vector<FusedCopyItem> items;
    uint64_t src = (uint64_t{1} << 40) + (rng() % 4096) * align;
    uint64_t dst = (uint64_t{3} << 40) + (rng() % 4096) * align;
    const bool src_scattered = rng() % 2 == 0;
    for (size_t i = 0; i < n; ++i) {
      uint64_t bytes = one_size ? size : (rng() % 8 == 0 ? 0 : 1 + rng() % (2 * kFusedTileBytes));
      const uint64_t s = src_scattered ? (uint64_t{1} << 40) + (rng() % (uint64_t{1} << 34)) * align
                                       : src;
      items.push_back({At(s), At(dst), bytes});
      src += (bytes + align - 1) / align * align;
      dst += (bytes + align - 1) / align * align + align * (rng() % 3);
    }
    const Encoded e = Encode(items);
    ExpectTilesCoverItems(items, e);
  }
}

TEST(FusedCopyEncodingTest, EmptyItemsAreSkippedByTheSearch) {
  std::vector<char> a(10, 'a'), b(10, 0);
  std::vector<FusedCopyItem> items = {{nullptr, nullptr, 0}, {nullptr, nullptr, 0},
                                      {a.data(), b.data(), 10}, {nullptr, nullptr, 0}};
  const Encoded e = Encode(items);
  ASSERT_EQ(e.header().num_tiles, 1u);
  EXPECT_EQ(FusedItemOfTile(e.header(), e.words(), 0), 2u);
  EmulateKernel(e);
  EXPECT_EQ(a, std::vector<char>(b.begin(), b.end()));
  // Nothing but empty items: no tile.
  EXPECT_EQ(Encode({{nullptr, nullptr, 0}, {nullptr, nullptr, 0}}).header().num_tiles, 0u);
  EXPECT_EQ(Encode({}).header().num_tiles, 0u);
}

TEST(FusedCopyEncodingTest, AFullLaunchOfManySmallItems) {
  std::vector<char> src(kFusedCopiesPerLaunch * 100), dst(src.size(), 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>(i % 251 + 1);
  std::vector<FusedCopyItem> items;
  for (size_t i = 0; i < kFusedCopiesPerLaunch; ++i) {
    items.push_back({src.data() + 100 * i, dst.data() + 100 * i, 100});
  }
  const Encoded e = Encode(items);
  EXPECT_EQ(e.header().num_tiles, kFusedCopiesPerLaunch);
  EXPECT_EQ(e.header().num_words, 0u);
  for (uint32_t t = 0; t < e.header().num_tiles; ++t) {
    EXPECT_EQ(FusedItemOfTile(e.header(), e.words(), t), t);
  }
  EmulateKernel(e);
  EXPECT_EQ(src, dst);
}

TEST(FusedCopyEncodingTest, TooManyTilesForAGrid) {
  // Sizes only: nothing is copied.
  auto params = std::make_unique<FusedCopyParams>();
  std::vector<FusedCopyItem> items = {{nullptr, nullptr, size_t{1} << 62}};
  absl::Status status = EncodeItems(items, *params);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("more than a grid holds"));
  items.push_back({nullptr, nullptr, 1});
  status = EncodeItems(items, *params);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("more than a grid holds"));
}

TEST(FusedCopyTest, AnEmptyLaunchDoesNothing) {
  EXPECT_TRUE(LaunchFusedCopy(absl::Span<const FusedCopyItem>(), nullptr).ok());
  const std::vector<FusedCopyItem> empty = {{nullptr, nullptr, 0}};
  EXPECT_TRUE(LaunchFusedCopy(empty, nullptr).ok());
}

}  // namespace
}  // namespace genesis::transfer::kernels
