// Checks on the CPU what the CUDA kernels compute: each plan is run here the
// way its kernel walks it (same plan, same index helpers, same per-element
// conversion) and compared with the CPU copies and conversions bit for bit.
#include "genesis/storage/kernels/kernel_plan.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "genesis/core/absl_compat.h"
#include "genesis/core/dtype.h"
#include "genesis/storage/convert.h"
#include "genesis/storage/kernels/device_convert.h"
#include "genesis/storage/kernels/dtype_dispatch.h"
#include "genesis/storage/kernels/fill.h"
#include "genesis/storage/kernels/kernel_test_util.h"
#include "genesis/storage/layout.h"
#include "genesis/storage/strided_copy.h"
#include "gtest/gtest.h"

namespace genesis::storage::kernels::internal {
namespace {

uintptr_t Address(const void* p) { return reinterpret_cast<uintptr_t>(p); }

// Calls move(src_offset, dst_offset) for every unit of `pass` in the order
// and with the index arithmetic of its kernel (TiledKernel or
// StridedKernel; kContiguous runs as StridedKernel does for a conversion
// that cannot use vectors). With `wide`, StridedKernel's 64-bit variant
// runs even where the 32-bit one would.
template <typename Move>
void WalkPass(const Pass& pass, bool wide, Move&& move) {
  if (pass.kind == PassKind::kTiled) {
    const TilePlan plan = PlanTiles(pass.dims);
    for (uint64_t t = 0; t < plan.count; ++t) {
      int64_t src_origin, dst_origin, row0, col0;
      TileAt(plan, t, &src_origin, &dst_origin, &row0, &col0);
      for (int64_t r = row0; r < std::min(row0 + kTile, plan.rows); ++r) {
        for (int64_t c = col0; c < std::min(col0 + kTile, plan.cols); ++c) {
          move(src_origin + r * plan.src_row_stride + c * plan.src_col_stride,
               dst_origin + r * plan.dst_row_stride + c * plan.dst_col_stride);
        }
      }
    }
  } else if (pass.fits_32bit && !wide) {
    const PassDims<uint32_t> dims = DimsAs<uint32_t>(pass.dims);
    for (uint32_t i = 0; i < static_cast<uint32_t>(pass.numel); ++i) {
      uint32_t s, d;
      OffsetsOf(dims, dims.rank, i, &s, &d);
      move(int64_t{s}, int64_t{d});
    }
  } else {
    const PassDims<uint64_t> dims = DimsAs<uint64_t>(pass.dims);
    for (uint64_t i = 0; i < static_cast<uint64_t>(pass.numel); ++i) {
      uint64_t s, d;
      OffsetsOf(dims, dims.rank, i, &s, &d);
      move(static_cast<int64_t>(s), static_cast<int64_t>(d));
    }
  }
}

// CopyStridedCuda's work on host buffers: a memcpy for kContiguous,
// otherwise words moved as its kernels move them.
void EmulateCopy(const void* src_base, const Layout& src, void* dst_base,
                 const Layout& dst, size_t item, bool wide = false,
                 PassKind* kind = nullptr) {
  const char* from = static_cast<const char*>(src_base) + src.offset() * item;
  char* to = static_cast<char*>(dst_base) + dst.offset() * item;
  const Pass pass = PlanCopy(src, dst, item, Address(from), Address(to));
  ASSERT_EQ(pass.numel * static_cast<int64_t>(pass.unit),
            src.numel() * static_cast<int64_t>(item));
  ASSERT_EQ(Address(from) % pass.unit, 0u);
  ASSERT_EQ(Address(to) % pass.unit, 0u);
  if (kind != nullptr) *kind = pass.kind;
  if (pass.kind == PassKind::kContiguous) {
    std::memcpy(to, from, pass.numel * pass.unit);
    return;
  }
  WalkPass(pass, wide, [&](int64_t s, int64_t d) {
    std::memcpy(to + d * pass.unit, from + s * pass.unit, pass.unit);
  });
}

// ConvertCuda's work on host buffers, for distinct dtypes.
void EmulateConvert(const void* src_base, const Layout& src, DType src_type,
                    void* dst_base, const Layout& dst, DType dst_type) {
  const size_t src_item = ItemSize(src_type);
  const size_t dst_item = ItemSize(dst_type);
  const char* from =
      static_cast<const char*>(src_base) + src.offset() * src_item;
  char* to = static_cast<char*>(dst_base) + dst.offset() * dst_item;
  const Pass pass = PlanConvert(src, dst, src_item);
  ASSERT_TRUE(
      VisitDType(src_type, "test", "src", [&]<typename From>(TypeTag<From>) {
        return VisitDType(
            dst_type, "test", "dst", [&]<typename To>(TypeTag<To>) {
              using Src = StorageOf<From>;
              using Dst = StorageOf<To>;
              const auto convert = [&](int64_t s, int64_t d) {
                Src value;
                std::memcpy(&value, from + s * sizeof(Src), sizeof(Src));
                const Dst result = ConvertStored<From, To>(value);
                std::memcpy(to + d * sizeof(Dst), &result, sizeof(Dst));
              };
              const int64_t vec = static_cast<int64_t>(
                  kVectorBytes / std::min(sizeof(Src), sizeof(Dst)));
              const std::optional<VectorSplit> split =
                  pass.kind == PassKind::kContiguous
                      ? SplitForVectors(Address(from), sizeof(Src), Address(to),
                                        sizeof(Dst), pass.numel, vec)
                      : std::nullopt;
              if (!split.has_value()) {
                WalkPass(pass, /*wide=*/false, convert);
                return absl::OkStatus();
              }
              // ContiguousKernel: the head, the aligned vectors, the tail.
              for (int64_t i = 0; i < split->head; ++i) convert(i, i);
              for (int64_t v = 0; v < split->vectors; ++v) {
                const int64_t first = split->head + v * vec;
                EXPECT_EQ(Address(from + first * sizeof(Src)) % kVectorBytes,
                          0u);
                EXPECT_EQ(Address(to + first * sizeof(Dst)) % kVectorBytes, 0u);
                for (int64_t k = 0; k < vec; ++k) convert(first + k, first + k);
              }
              const int64_t tail = split->head + split->vectors * vec;
              EXPECT_LT(pass.numel - tail, vec);
              for (int64_t i = tail; i < pass.numel; ++i) convert(i, i);
              return absl::OkStatus();
            });
      }).ok());
}

// A base buffer of `numel` items of `item` bytes that starts `misalign`
// bytes past a 16-byte boundary.
struct HostBase {
  HostBase(int64_t numel, size_t item, size_t misalign)
      : storage(numel * item + 32), offset(misalign) {
    offset = (16 - Address(storage.data()) % 16 + misalign) % 16;
  }
  uint8_t* data() { return storage.data() + offset; }
  Bytes bytes(size_t count) const {
    return Bytes(storage.begin() + offset, storage.begin() + offset + count);
  }
  Bytes storage;
  size_t offset;
};

// ---- Plan choices.

Layout Contiguous(std::initializer_list<int64_t> shape, int64_t offset = 0) {
  return Layout::Contiguous(shape, offset).value();
}

TEST(PlanCopyTest, ContiguousViewsAreOneRun) {
  const Layout view = Contiguous({64, 32});
  const Pass pass = PlanCopy(view, view, 4, 0x1000, 0x2000);
  EXPECT_EQ(pass.kind, PassKind::kContiguous);
  EXPECT_EQ(pass.unit, 16u);
  EXPECT_EQ(pass.numel, 64 * 32 / 4);
}

TEST(PlanCopyTest, ATransposedMatrixIsTiled) {
  const Layout t = Contiguous({4096, 4096}).Transpose(0, 1).value();
  const Pass pass = PlanCopy(t, Contiguous({4096, 4096}), 4, 0x1000, 0x2000);
  EXPECT_EQ(pass.kind, PassKind::kTiled);
  EXPECT_EQ(pass.unit, 4u);
  EXPECT_TRUE(pass.fits_32bit);
  ASSERT_EQ(pass.dims.rank, 2);
  EXPECT_EQ(pass.dims.src_stride[0], 1);
  EXPECT_EQ(pass.dims.src_stride[1], 4096);
  EXPECT_EQ(pass.dims.dst_stride[1], 1);
}

TEST(PlanCopyTest, RowSlicesMoveAsWideWordsWhereAligned) {
  // x[:, 4:8] of a 64 x 64 float matrix: rows of 16 bytes, 16-aligned.
  const Layout rows = Contiguous({64, 64}).Slice(1, 4, 8).value();
  Pass pass = PlanCopy(rows, Contiguous({64, 4}), 4, 0x1000 + 16, 0x2000);
  EXPECT_EQ(pass.kind, PassKind::kGeneric);
  EXPECT_EQ(pass.unit, 16u);
  EXPECT_EQ(pass.numel, 64);
  // Only 4-byte aligned: 4-byte words.
  pass = PlanCopy(rows, Contiguous({64, 4}), 4, 0x1000 + 4, 0x2000);
  EXPECT_EQ(pass.unit, 4u);
  EXPECT_EQ(pass.numel, 256);
}

TEST(PlanCopyTest, OddItemsSplitIntoWords) {
  const Layout t = Contiguous({10, 20}).Transpose(0, 1).value();
  const Pass pass = PlanCopy(t, Contiguous({20, 10}), 6, 0x1000, 0x2000);
  EXPECT_EQ(pass.unit, 2u);
  ASSERT_EQ(pass.dims.rank, 3);  // The 3 words of an element innermost.
  EXPECT_EQ(pass.dims.size[2], 3);
  EXPECT_EQ(pass.kind, PassKind::kGeneric);
}

TEST(PlanCopyTest, NineDimsWhenNothingMerges) {
  // Eight dims of size 2 with scattered strides, 3-byte items: nothing
  // merges, and the bytes of an element make a ninth dim.
  const int64_t shape[8] = {2, 2, 2, 2, 2, 2, 2, 2};
  const int64_t strides[8] = {3, 7, 13, 29, 61, 127, 257, 521};
  const Layout src = Layout::Strided(shape, strides).value();
  const Layout dst = Layout::Contiguous(shape)
                         .value()
                         .Permute({7, 6, 5, 4, 3, 2, 1, 0})
                         .value();
  // dst strides become 1..128 reversed: still no merge with src.
  const Pass pass = PlanCopy(src, dst, 3, 0x1001, 0x2003);
  EXPECT_EQ(pass.dims.rank, 9);
  EXPECT_EQ(pass.unit, 1u);
}

TEST(PlanCopyTest, HugeOffsetsUse64BitIndices) {
  const int64_t shape[2] = {2, 8};
  const int64_t strides[2] = {int64_t{1} << 31, 2};
  const Layout src = Layout::Strided(shape, strides).value();
  const Pass pass =
      PlanCopy(src, Layout::Contiguous(shape).value(), 1, 0x1000, 0x2000);
  EXPECT_EQ(pass.kind, PassKind::kGeneric);
  EXPECT_FALSE(pass.fits_32bit);
}

TEST(PlanConvertTest, ChoosesThePathByLayout) {
  EXPECT_EQ(PlanConvert(Contiguous({7, 9}, 3), Contiguous({7, 9}), 4).kind,
            PassKind::kContiguous);
  const Layout t = Contiguous({4096, 4096}).Transpose(0, 1).value();
  EXPECT_EQ(PlanConvert(t, Contiguous({4096, 4096}), 4).kind, PassKind::kTiled);
  const Layout broadcast = Contiguous({1, 9}).Expand({7, 9}).value();
  EXPECT_EQ(PlanConvert(broadcast, Contiguous({7, 9}), 4).kind,
            PassKind::kGeneric);
  // A single element.
  const Pass one = PlanConvert(Layout(), Layout(), 8);
  EXPECT_EQ(one.kind, PassKind::kContiguous);
  EXPECT_EQ(one.numel, 1);
  EXPECT_EQ(one.dims.rank, 1);
}

// ---- Emulated kernels against the CPU code.

TEST(EmulatedCopyTest, MatchesCopyStridedOnRandomViews) {
  std::mt19937 rng(1234);
  int kinds[3] = {};
  for (int round = 0; round < 2000; ++round) {
    const std::vector<int64_t> shape = RandomShape(rng);
    const ViewCase src = RandomView(rng, shape);
    const ViewCase dst = RandomWritableView(rng, shape);
    const size_t items[] = {1, 2, 3, 4, 6, 8, 12, 16};
    const size_t item = items[Uniform(rng, 0, 7)];
    HostBase src_base(src.base_numel, item, Uniform(rng, 0, 15));
    const Bytes data = SampleElements(DType::kUInt8, src.base_numel * item,
                                      static_cast<uint32_t>(round));
    std::copy(data.begin(), data.end(), src_base.data());
    HostBase want(dst.base_numel, item, 0);
    HostBase got(dst.base_numel, item, Uniform(rng, 0, 15));
    const size_t dst_bytes = dst.base_numel * item;
    std::memset(want.data(), 0xA5, dst_bytes);
    std::memset(got.data(), 0xA5, dst_bytes);
    ASSERT_TRUE(
        CopyStrided(src_base.data(), src.layout, want.data(), dst.layout, item)
            .ok());
    if (src.layout.numel() > 0) {
      PassKind kind;
      EmulateCopy(src_base.data(), src.layout, got.data(), dst.layout, item,
                  /*wide=*/round % 2 == 1, &kind);
      ++kinds[static_cast<int>(kind)];
    }
    ExpectSameBytes(
        got.bytes(dst_bytes), want.bytes(dst_bytes), item,
        absl::StrCat("round ", round, ": ", src.layout.ToString(), " -> ",
                     dst.layout.ToString(), ", ", item, "-byte items"));
    if (HasFailure()) return;
  }
  // The cases reach every kernel.
  EXPECT_GT(kinds[static_cast<int>(PassKind::kContiguous)], 20);
  EXPECT_GT(kinds[static_cast<int>(PassKind::kTiled)], 20);
  EXPECT_GT(kinds[static_cast<int>(PassKind::kGeneric)], 20);
}

TEST(EmulatedCopyTest, TransposesOfOddSizes) {
  for (const auto& [rows, cols] : OddTransposeShapes()) {
    for (size_t item : {1, 2, 4, 8, 16}) {
      for (size_t misalign : {0, 1}) {
        const Layout src = Contiguous({rows, cols}).Transpose(0, 1).value();
        const Layout dst = Contiguous({cols, rows});
        HostBase src_base(rows * cols, item, misalign);
        const Bytes data = SampleElements(DType::kUInt8, rows * cols * item, 7);
        std::copy(data.begin(), data.end(), src_base.data());
        Bytes want(rows * cols * item);
        Bytes got(rows * cols * item);
        CopyStridedToContiguous(src_base.data(), src, item, want.data());
        EmulateCopy(src_base.data(), src, got.data(), dst, item);
        ExpectSameBytes(got, want, item,
                        absl::StrCat(rows, " x ", cols, ", ", item,
                                     "-byte items, misaligned by ", misalign));
      }
    }
  }
}

TEST(EmulatedConvertTest, MatchesConvertStridedForEveryPair) {
  std::mt19937 rng(99);
  for (DType from : kAllDTypes) {
    for (DType to : kAllDTypes) {
      if (from == to) continue;  // ConvertCuda copies those.
      for (int round = 0; round < 12; ++round) {
        std::vector<int64_t> shape = RandomShape(rng);
        // Contiguous, transposed and random views in turn.
        ViewCase src, dst;
        if (round % 3 == 0) {
          const int64_t n = Uniform(rng, 0, 200);
          src =
              WithBase(Layout::Contiguous({n}, Uniform(rng, 0, 9)).value(), 0);
          dst =
              WithBase(Layout::Contiguous({n}, Uniform(rng, 0, 9)).value(), 2);
        } else if (round % 3 == 1) {
          const int64_t r = Uniform(rng, 1, 70), c = Uniform(rng, 1, 70);
          src = WithBase(
              Layout::Contiguous({r, c}).value().Transpose(0, 1).value(), 1);
          dst = WithBase(Layout::Contiguous({c, r}).value(), 0);
        } else {
          src = RandomView(rng, shape);
          dst = RandomWritableView(rng, shape);
        }
        const size_t src_item = ItemSize(from);
        const size_t dst_item = ItemSize(to);
        HostBase src_base(src.base_numel, src_item, 0);
        const Bytes data = SampleElements(from, src.base_numel, round + 17);
        std::copy(data.begin(), data.end(), src_base.data());
        const size_t dst_bytes = dst.base_numel * dst_item;
        HostBase want(dst.base_numel, dst_item, 0);
        HostBase got(dst.base_numel, dst_item, 0);
        std::memset(want.data(), 0xA5, dst_bytes);
        std::memset(got.data(), 0xA5, dst_bytes);
        ASSERT_TRUE(ConvertStrided(src_base.data(), src.layout, from,
                                   want.data(), dst.layout, to)
                        .ok());
        if (src.layout.numel() > 0) {
          EmulateConvert(src_base.data(), src.layout, from, got.data(),
                         dst.layout, to);
        }
        ExpectSameBytes(
            got.bytes(dst_bytes), want.bytes(dst_bytes), dst_item,
            absl::StrCat(ToAbsl(DTypeName(from)), " -> ", ToAbsl(DTypeName(to)),
                         " round ", round, ": ", src.layout.ToString(), " -> ",
                         dst.layout.ToString()));
        if (HasFailure()) return;
      }
    }
  }
}

TEST(ConvertStoredTest, EqualsTheCpuConversionForEveryPair) {
  for (DType from : kAllDTypes) {
    for (DType to : kAllDTypes) {
      if (from == to) continue;
      const int64_t n = 5000;
      const Bytes src = SampleElements(from, n, 3);
      Bytes want(n * ItemSize(to));
      ASSERT_TRUE(ConvertContiguous(src.data(), from, want.data(), to, n).ok());
      Bytes got(n * ItemSize(to));
      ASSERT_TRUE(
          VisitDType(from, "test", "src", [&]<typename F>(TypeTag<F>) {
            return VisitDType(to, "test", "dst", [&]<typename T>(TypeTag<T>) {
              for (int64_t i = 0; i < n; ++i) {
                StorageOf<F> value;
                std::memcpy(&value, src.data() + i * sizeof(value),
                            sizeof(value));
                const StorageOf<T> result = ConvertStored<F, T>(value);
                std::memcpy(got.data() + i * sizeof(result), &result,
                            sizeof(result));
              }
              return absl::OkStatus();
            });
          }).ok());
      ExpectSameBytes(
          got, want, ItemSize(to),
          absl::StrCat(ToAbsl(DTypeName(from)), " -> ", ToAbsl(DTypeName(to))));
    }
  }
}

// ---- Vectors and fills.

TEST(SplitForVectorsTest, AlignsBothSidesOrSaysItCannot) {
  for (uintptr_t src = 0; src < 32; src += 2) {
    for (uintptr_t dst = 0; dst < 32; dst += 4) {
      for (int64_t numel : {0, 1, 7, 8, 9, 100}) {
        // float32 -> float16: 8 elements are 32 and 16 bytes.
        const std::optional<VectorSplit> split = SplitForVectors(
            0x1000 + 2 * src, 4, 0x2000 + dst / 2 * 2, 2, numel, 8);
        if (!split.has_value()) continue;
        EXPECT_LE(split->head, std::min<int64_t>(numel, 7));
        EXPECT_LE(split->head + split->vectors * 8, numel);
        EXPECT_LT(numel - split->head - split->vectors * 8, 8);
        if (split->head < numel && split->vectors > 0) {
          EXPECT_EQ((0x1000 + 2 * src + split->head * 4) % 16, 0u);
          EXPECT_EQ((0x2000 + dst / 2 * 2 + split->head * 2) % 16, 0u);
        }
      }
    }
  }
  // Both 16-byte aligned: no head.
  EXPECT_EQ(SplitForVectors(0x1000, 4, 0x2000, 2, 100, 8)->head, 0);
  EXPECT_EQ(SplitForVectors(0x1000, 4, 0x2000, 2, 100, 8)->vectors, 12);
  // float32 at 4 mod 16 and bfloat16 at 0 mod 16 can never line up.
  EXPECT_FALSE(SplitForVectors(0x1004, 4, 0x2000, 2, 100, 8).has_value());
}

TEST(PlanFillTest, EmulatedFillMatchesFillHost) {
  const uint8_t pattern[8] = {0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF};
  for (size_t size : {1, 2, 4, 8}) {
    for (size_t misalign = 0; misalign < 16; ++misalign) {
      for (int64_t numel : {1, 2, 3, 7, 8, 9, 31, 100, 1001}) {
        HostBase want(numel + 4, size, misalign);
        HostBase got(numel + 4, size, misalign);
        const size_t bytes = (numel + 4) * size;
        std::memset(want.data(), 0xA5, bytes);
        std::memset(got.data(), 0xA5, bytes);
        ASSERT_TRUE(FillHost(want.data(), numel, pattern, size).ok());
        // FillKernel: the head and the tail by bytes, the body by lines.
        const FillPlan plan =
            PlanFill(Address(got.data()), numel, pattern, size);
        ASSERT_EQ(plan.bytes, numel * static_cast<int64_t>(size));
        ASSERT_LT(plan.bytes - plan.head - plan.vectors * 16, 16);
        for (int64_t j = 0; j < plan.head; ++j)
          got.data()[j] = FillByte(plan, j);
        for (int64_t v = 0; v < plan.vectors; ++v) {
          uint8_t* line = got.data() + plan.head + 16 * v;
          ASSERT_EQ(Address(line) % 16, 0u);
          std::memcpy(line, plan.line, 16);
        }
        for (int64_t j = plan.head + 16 * plan.vectors; j < plan.bytes; ++j) {
          got.data()[j] = FillByte(plan, j);
        }
        ExpectSameBytes(got.bytes(bytes), want.bytes(bytes), 1,
                        absl::StrCat("size ", size, " misalign ", misalign,
                                     " numel ", numel));
      }
    }
  }
}

}  // namespace
}  // namespace genesis::storage::kernels::internal
