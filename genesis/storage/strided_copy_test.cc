#include "genesis/storage/strided_copy.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "genesis/storage/layout.h"
#include "genesis/storage/layout_test_util.h"
#include "gtest/gtest.h"

namespace genesis::storage {
namespace {

using strided_internal::LoopPlan;
using strided_internal::PlanLoops;

constexpr size_t kItemSizes[] = {1, 2, 4, 8, 3, 16};

using Bytes = std::vector<unsigned char>;

Bytes RandomBytes(std::mt19937& rng, size_t n) {
  Bytes bytes(n);
  for (unsigned char& b : bytes) b = static_cast<unsigned char>(rng());
  return bytes;
}

// Calls fn(i, base_index) for each element of `layout` in row-major order:
// the naive definition of a view, independent of the code under test.
template <typename Fn>
void ForEachElement(const Layout& layout, Fn fn) {
  if (layout.numel() == 0) return;
  std::vector<int64_t> index(layout.rank(), 0);
  for (int64_t i = 0;; ++i) {
    int64_t at = layout.offset();
    for (int d = 0; d < layout.rank(); ++d) at += index[d] * layout.stride(d);
    fn(i, at);
    int d = layout.rank() - 1;
    for (; d >= 0; --d) {
      if (++index[d] < layout.size(d)) break;
      index[d] = 0;
    }
    if (d < 0) return;
  }
}


// Reference for CopyStrided: element by element.
void NaiveCopy(const Bytes& src, const Layout& src_layout, Bytes& dst,
               const Layout& dst_layout, size_t item) {
  const std::vector<int64_t> from = BaseIndices(src_layout);
  const std::vector<int64_t> to = BaseIndices(dst_layout);
  for (size_t i = 0; i < from.size(); ++i) {
    std::memcpy(&dst[to[i] * item], &src[from[i] * item], item);
  }
}

int64_t Numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

// A view of the given shape over a fresh base of base_numel elements, built
// the way users build views: a contiguous base in a random dim order,
// permuted back, sliced with random starts and steps and, if `broadcast`,
// some dims expanded from size 1 with stride 0.
struct View {
  Layout layout;
  int64_t base_numel = 0;
};

View RandomView(std::mt19937& rng, const std::vector<int64_t>& shape,
                bool broadcast) {
  const auto uniform = [&rng](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const int rank = static_cast<int>(shape.size());
  std::vector<int64_t> base_shape(rank), start(rank), step(rank);
  std::vector<bool> expand(rank);
  for (int d = 0; d < rank; ++d) {
    expand[d] = broadcast && uniform(0, 4) == 0;
    start[d] = uniform(0, 2);
    step[d] = uniform(0, 2) == 0 ? uniform(2, 3) : 1;
    base_shape[d] = expand[d]       ? 1
                    : shape[d] == 0 ? uniform(0, 3)
                                    : start[d] + (shape[d] - 1) * step[d] + 1 +
                                          uniform(0, 1);
  }
  std::vector<int> perm(rank);  // Storage order of the dims.
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int64_t> stored_shape(rank);
  std::vector<int> inverse(rank);
  for (int i = 0; i < rank; ++i) {
    stored_shape[i] = base_shape[perm[i]];
    inverse[perm[i]] = i;
  }
  const int64_t offset = uniform(0, 3);
  Layout layout = *Layout::Contiguous(stored_shape, offset);
  layout = *layout.Permute(inverse);
  for (int d = 0; d < rank; ++d) {
    if (expand[d]) continue;
    const int64_t stop =
        shape[d] == 0 ? start[d] : start[d] + (shape[d] - 1) * step[d] + 1;
    layout = *layout.Slice(d, start[d], stop, step[d]);
  }
  layout = *layout.Expand(shape);
  EXPECT_EQ(std::vector<int64_t>(layout.shape().begin(), layout.shape().end()),
            shape);
  View view{layout, offset + Numel(stored_shape)};
  EXPECT_TRUE(layout.CheckFits(view.base_numel).ok()) << layout;
  return view;
}

std::vector<int64_t> RandomShape(std::mt19937& rng, int rank, int64_t max) {
  std::vector<int64_t> shape(rank);
  for (int64_t& s : shape) {
    s = std::uniform_int_distribution<int64_t>(1, max)(rng);
  }
  if (rank > 0 && rng() % 10 == 0) shape[rng() % rank] = 0;
  return shape;
}

// The random shapes: ranks 0 to 5 with sizes up to 6, and now and then rank
// 8 with sizes up to 3.
std::vector<int64_t> AnyShape(std::mt19937& rng) {
  if (rng() % 8 == 0) return RandomShape(rng, kMaxDims, 3);
  return RandomShape(rng, static_cast<int>(rng() % 6), 6);
}

// Checks all three copies for src -> dst views of the same shape, each
// allowed `threads` threads.
void CheckAllCopies(std::mt19937& rng, const View& src, const View& dst,
                    size_t item, int threads = 1) {
  SCOPED_TRACE(testing::Message() << "item " << item << " src " << src.layout
                                  << " dst " << dst.layout << " threads " << threads);
  const Bytes src_base = RandomBytes(rng, src.base_numel * item);
  const int64_t numel = src.layout.numel();

  // Gather, with a guard region behind the output that must stay untouched.
  const size_t guard = 16;
  Bytes gathered = RandomBytes(rng, numel * item + guard);
  Bytes expected_gathered = gathered;
  NaiveCopy(src_base, src.layout, expected_gathered,
            *Layout::Contiguous(src.layout.shape()), item);
  CopyStridedToContiguous(src_base.data(), src.layout, item, gathered.data(), threads);
  ASSERT_EQ(gathered, expected_gathered);

  // Scatter the gathered items into dst's base; unreached bytes keep their
  // values.
  Bytes scattered = RandomBytes(rng, dst.base_numel * item);
  Bytes expected_scattered = scattered;
  NaiveCopy(gathered, *Layout::Contiguous(dst.layout.shape()),
            expected_scattered, dst.layout, item);
  CopyContiguousToStrided(gathered.data(), dst.layout, item, scattered.data(), threads);
  ASSERT_EQ(scattered, expected_scattered);

  // View to view.
  Bytes copied = RandomBytes(rng, dst.base_numel * item);
  Bytes expected_copied = copied;
  NaiveCopy(src_base, src.layout, expected_copied, dst.layout, item);
  ASSERT_TRUE(
      CopyStrided(src_base.data(), src.layout, copied.data(), dst.layout, item, threads)
          .ok());
  ASSERT_EQ(copied, expected_copied);
}

TEST(StridedCopyTest, RandomViewsMatchNaiveCopy) {
  std::mt19937 rng(42);
  for (size_t item : kItemSizes) {
    for (int trial = 0; trial < 300; ++trial) {
      const std::vector<int64_t> shape = AnyShape(rng);
      const View src = RandomView(rng, shape, /*broadcast=*/true);
      const View dst = RandomView(rng, shape, /*broadcast=*/false);
      CheckAllCopies(rng, src, dst, item);
      if (HasFatalFailure()) return;
    }
  }
}

TEST(StridedCopyTest, Scalar) {
  for (size_t item : kItemSizes) {
    std::mt19937 rng(7);
    const View src{*Layout::Contiguous({}, 3), 4};
    const View dst{*Layout::Contiguous({}, 1), 2};
    CheckAllCopies(rng, src, dst, item);
  }
}

TEST(StridedCopyTest, EmptyViewsCopyNothing) {
  std::mt19937 rng(8);
  for (size_t item : kItemSizes) {
    const View src{*Layout::Contiguous({3, 0, 2}), 0};
    const View dst{*Layout::Strided({3, 0, 2}, {0, 0, 0}), 0};
    CheckAllCopies(rng, src, dst, item);
    // Null buffers are fine when nothing is copied.
    CopyStridedToContiguous(nullptr, src.layout, item, nullptr);
    EXPECT_TRUE(
        CopyStrided(nullptr, src.layout, nullptr, dst.layout, item).ok());
  }
}

TEST(StridedCopyTest, Rank8) {
  std::mt19937 rng(9);
  const std::vector<int64_t> shape = {2, 3, 2, 1, 2, 3, 2, 2};
  const Layout base = *Layout::Contiguous(shape);
  const Layout permuted = *base.Permute({7, 2, 5, 0, 3, 6, 1, 4});
  const Layout back = *Layout::Contiguous(permuted.shape());
  for (size_t item : kItemSizes) {
    CheckAllCopies(rng, {permuted, base.numel()}, {back, back.numel()}, item);
  }
}

// Transposes big enough for several tiles, with partial tiles at the edges,
// also inside a batch dim and with a sliced (non-unit) outer source stride.
TEST(StridedCopyTest, TransposesUseTilesCorrectly) {
  std::mt19937 rng(10);
  const std::vector<std::vector<int64_t>> shapes = {
      {67, 45}, {130, 97}, {33, 300}, {3, 70, 33}};
  for (size_t item : kItemSizes) {
    for (const std::vector<int64_t>& shape : shapes) {
      const Layout base = *Layout::Contiguous(shape);
      const int r = base.rank();
      const Layout t = *base.Transpose(r - 2, r - 1);
      const Layout out = *Layout::Contiguous(t.shape());
      CheckAllCopies(rng, {t, base.numel()}, {out, out.numel()}, item);
      // Every other column of the transpose.
      const Layout s = *t.Slice(r - 2, 1, t.size(r - 2), 2);
      const Layout s_out = *Layout::Contiguous(s.shape());
      CheckAllCopies(rng, {s, base.numel()}, {s_out, s_out.numel()}, item);
      // Transposed destination, contiguous source.
      CheckAllCopies(rng, {out, out.numel()}, {t, base.numel()}, item);
      // A broadcast row, transposed.
      const Layout row = *Layout::Contiguous({shape.back(), 1});
      const Layout wide = *row.Expand({shape.back(), 50});
      const Layout wide_t = *wide.Transpose(0, 1);
      const Layout wide_out = *Layout::Contiguous(wide_t.shape());
      CheckAllCopies(rng, {wide_t, row.numel()}, {wide_out, wide_out.numel()},
                     item);
    }
  }
}

// Item sizes the transposes treat differently: in-register squares (1, 2,
// 4, 8 and 16 bytes), two overlapping words (3, 5, 12), memcpy (24, 32, 40),
// and the general loops (64).
constexpr size_t kTransposeItemSizes[] = {1, 2,  4,  8,  16, 3,
                                          5, 12, 24, 32, 40, 64};

// The transpose of a matrix of `shape` (items of `item` bytes) made contiguous and
// back, with no offset and with offsets on both sides that shift the rows against
// cache lines.
void CheckTransposesWithOffsets(std::mt19937& rng, const std::vector<int64_t>& shape,
                                size_t item) {
  for (int64_t offset : {0, 5}) {
    const Layout base = *Layout::Contiguous(shape, offset);
    const Layout t = *base.Transpose(0, 1);
    const View src{t, offset + base.numel()};
    const Layout out = *Layout::Contiguous(t.shape(), (offset * 7) % 11);
    const View dst{out, out.offset() + out.numel()};
    CheckAllCopies(rng, src, dst, item);
    CheckAllCopies(rng, dst, src, item);
  }
}

// Gathers, scatters and view-to-view copies of transposes of odd and thin
// shapes, of shapes that fill few squares and of shapes whose rows span
// whole cache lines (short and long ones), at every item size, with offsets
// on both sides that shift the rows against cache lines.
TEST(StridedCopyTest, TransposesOfOddSizesAndOffsets) {
  std::mt19937 rng(11);
  const std::vector<std::vector<int64_t>> shapes = {
      {1000, 37}, {37, 1000}, {4097, 3},  {3, 4097}, {17, 16},
      {16, 17},   {96, 128},  {128, 96},  {64, 192}, {192, 64},
      {33, 65},   {50, 2},    {1024, 20}, {20, 1024}};
  for (size_t item : kTransposeItemSizes) {
    for (const std::vector<int64_t>& shape : shapes) {
      CheckTransposesWithOffsets(rng, shape, item);
      if (HasFatalFailure()) return;
    }
  }
}

// Float transposes with both sides of 512 items or more, below the streamed size: the
// AVX-512 16 x 16 squares where the CPU has them (AVX2's elsewhere), with sides that are
// not multiples of 16 and offsets that shift the rows against cache lines, both ways.
TEST(StridedCopyTest, WideFloatTransposesMatchNaiveCopy) {
  std::mt19937 rng(14);
  const std::vector<std::vector<int64_t>> shapes = {{512, 512}, {530, 517}, {1024, 600}};
  for (const std::vector<int64_t>& shape : shapes) {
    CheckTransposesWithOffsets(rng, shape, sizeof(float));
    if (HasFatalFailure()) return;
  }
}

// Every permutation of 3-D shapes (batches of transposes, or transposes of
// a merged pair of dims, or none), also sliced, and a few of a 4-D shape.
TEST(StridedCopyTest, PermutesMatchNaiveCopy) {
  std::mt19937 rng(12);
  const std::vector<std::vector<int64_t>> shapes = {
      {3, 70, 33}, {5, 16, 48}, {40, 3, 20}};
  for (size_t item : kTransposeItemSizes) {
    for (const std::vector<int64_t>& shape : shapes) {
      std::vector<int> perm = {0, 1, 2};
      do {
        SCOPED_TRACE(testing::Message()
                     << "perm " << perm[0] << perm[1] << perm[2]);
        const Layout base = *Layout::Contiguous(shape, 2);
        const Layout p = *base.Permute(perm);
        const View src{p, 2 + base.numel()};
        const Layout out = *Layout::Contiguous(p.shape(), 1);
        const View dst{out, 1 + out.numel()};
        CheckAllCopies(rng, src, dst, item);
        CheckAllCopies(rng, dst, src, item);
        // Every other index of the middle dim.
        const Layout s = *p.Slice(1, 1, p.size(1), 2);
        const Layout s_out = *Layout::Contiguous(s.shape());
        CheckAllCopies(rng, {s, src.base_numel}, {s_out, s_out.numel()}, item);
        if (HasFatalFailure()) return;
      } while (std::next_permutation(perm.begin(), perm.end()));
    }
    const Layout base = *Layout::Contiguous({4, 6, 18, 10}, 3);
    for (const std::vector<int>& perm : std::vector<std::vector<int>>{
             {3, 2, 1, 0}, {0, 3, 1, 2}, {2, 0, 3, 1}, {1, 3, 0, 2}}) {
      const Layout p = *base.Permute(perm);
      const Layout out = *Layout::Contiguous(p.shape());
      CheckAllCopies(rng, {p, 3 + base.numel()}, {out, out.numel()}, item);
      CheckAllCopies(rng, {out, out.numel()}, {p, 3 + base.numel()}, item);
      if (HasFatalFailure()) return;
    }
  }
}

// Transposes of 8 MiB and more in all, where the copies may use
// non-temporal stores: a batch of rows x cols matrices is gathered from the
// transposed view of a batch of cols x rows ones and scattered back into
// it, with the contiguous side `misalign` bytes past an allocation, checked
// item by item with guard bytes around the output.
TEST(StridedCopyTest, BigTransposes) {
  // Random bytes, 8 at a time (cheaper than RandomBytes for big buffers).
  std::mt19937_64 rng(13);
  const auto random_bytes = [&rng](size_t n) {
    Bytes bytes(n);
    for (size_t i = 0; i < n; i += 8) {
      const uint64_t word = rng();
      std::memcpy(&bytes[i], &word, std::min<size_t>(8, n - i));
    }
    return bytes;
  };
  constexpr int64_t kBytes = int64_t{8} << 20;
  struct Shape {
    int64_t batch, rows, cols;
  };
  for (size_t item : {1, 2, 4, 8, 16, 3}) {
    const int64_t size = static_cast<int64_t>(item);
    // One big matrix with destination rows of whole cache lines or not,
    // both ways; and batches of small matrices with long destination rows
    // (whole cache lines where 1 KiB is whole items) and short ones.
    const int64_t many = kBytes / (1024 * size) + 3;
    const int64_t long_row = 1024 / size;
    const std::vector<Shape> shapes = {
        {1, many, 1024},
        {1, 1024, many},
        {1, many, 1000},
        {kBytes / (21 * long_row * size) + 1, 21, long_row},
        {kBytes / (33 * 37 * size) + 1, 33, 37}};
    for (const Shape& shape : shapes) {
      for (size_t misalign : {size_t{0}, size_t{12}}) {
        const auto [batch, rows, cols] = shape;
        SCOPED_TRACE(testing::Message()
                     << "item " << item << " batch " << batch << " rows "
                     << rows << " cols " << cols << " misalign " << misalign);
        const size_t bytes = static_cast<size_t>(batch * rows * cols) * item;
        const size_t guard = 64;
        // The source: cols x rows matrices; their transposed view is
        // rows x cols each.
        const Bytes matrices = random_bytes(bytes);
        const Layout t =
            *Layout::Contiguous({batch, cols, rows})->Transpose(1, 2);
        Bytes out = random_bytes(guard + misalign + bytes + guard);
        Bytes expected = out;
        unsigned char* gathered = out.data() + guard + misalign;
        CopyStridedToContiguous(matrices.data(), t, item, gathered);
        for (int64_t b = 0; b < batch; ++b) {
          const int64_t at = b * rows * cols;
          for (int64_t r = 0; r < rows; ++r) {
            for (int64_t c = 0; c < cols; ++c) {
              std::memcpy(
                  &expected[guard + misalign + (at + r * cols + c) * item],
                  &matrices[(at + c * rows + r) * item], item);
            }
          }
        }
        ASSERT_TRUE(out == expected);
        // And back: the gathered matrices scattered into the transposed
        // view of a fresh buffer give the source again.
        Bytes back = random_bytes(misalign + bytes);
        CopyContiguousToStrided(gathered, t, item, back.data() + misalign);
        ASSERT_TRUE(
            std::equal(back.begin() + misalign, back.end(), matrices.begin()));
      }
    }
  }
}

// Copies of 2 MiB and more shared among threads (bands of the outermost loop, one
// per MiB at most): transposes whose sides are multiples of the squares' edge or not,
// in cache and streamed, both ways; every other row; a batch of transposes (outermost
// loop of 2 or 3); and a permute. Four threads split every one of them into parts,
// whatever the machine's cores; kAllCores uses what the machine has.
TEST(StridedCopyTest, CopiesSharedAmongThreadsMatchNaiveCopy) {
  std::mt19937 rng(15);
  struct Case {
    std::vector<int64_t> shape;
    std::vector<int> perm;
    size_t item;
  };
  const std::vector<Case> cases = {
      {{1024, 1024}, {1, 0}, 4},    {{1037, 1000}, {1, 0}, 4},  {{1500, 1700}, {1, 0}, 1},
      {{1100, 1100}, {1, 0}, 8},    {{2, 700, 900}, {0, 2, 1}, 4}, {{600, 3, 700}, {1, 0, 2}, 2},
      {{4100, 300}, {1, 0}, 3}};
  for (const Case& c : cases) {
    const Layout base = *Layout::Contiguous(c.shape, 1);
    const Layout p = *base.Permute(c.perm);
    const Layout out = *Layout::Contiguous(p.shape(), 3);
    for (const int threads : {4, kAllCores}) {
      CheckAllCopies(rng, {p, 1 + base.numel()}, {out, 3 + out.numel()}, c.item, threads);
      CheckAllCopies(rng, {out, 3 + out.numel()}, {p, 1 + base.numel()}, c.item, threads);
      if (HasFatalFailure()) return;
    }
  }
  // Every other row of a 2048 x 1024 float matrix.
  const Layout rows = *Layout::Contiguous({2048, 1024})->Slice(0, 0, 2048, 2);
  const Layout rows_out = *Layout::Contiguous(rows.shape());
  CheckAllCopies(rng, {rows, 2048 * 1024}, {rows_out, rows_out.numel()}, 4, /*threads=*/4);
}

TEST(StridedCopyTest, CopyStridedErrors) {
  const Layout a = *Layout::Contiguous({2, 3});
  const Layout b = *Layout::Contiguous({3, 2});
  char buffer[64] = {};
  absl::Status status = CopyStrided(buffer, a, buffer + 32, b, 1);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "CopyStrided: source shape [2, 3] differs from destination shape "
            "[3, 2]");
  status = CopyStrided(buffer, a, buffer + 32, a, 0);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "CopyStrided: item_size = 0");
  const Layout broadcast = *Layout::Strided({2, 3}, {0, 1});
  status = CopyStrided(buffer, a, buffer + 32, broadcast, 1);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("destination dim 0 has stride 0 and size 2"),
            absl::string_view::npos)
      << status;
  // A broadcast source is fine, and so is a stride-0 size-1 destination dim.
  const Layout one = *Layout::Strided({1, 3}, {0, 1});
  EXPECT_TRUE(
      CopyStrided(buffer, *broadcast.Slice(0, 0, 1), buffer + 32, one, 1).ok());
}

TEST(StridedCopyTest, PlanMergesAndOrdersLoops) {
  // Contiguous to contiguous: one loop.
  LoopPlan plan = PlanLoops({2, 3, 4}, {12, 4, 1}, {12, 4, 1});
  ASSERT_EQ(plan.rank, 1);
  EXPECT_EQ(plan.dims[0].size, 24);
  EXPECT_EQ(plan.dims[0].src_stride, 1);
  // Size-1 dims vanish; a transposed source keeps two loops, inner on the
  // destination's unit stride.
  plan = PlanLoops({4, 1, 6}, {1, 99, 4}, {6, 6, 1});
  ASSERT_EQ(plan.rank, 2);
  EXPECT_EQ(plan.dims[0].size, 4);
  EXPECT_EQ(plan.dims[1].size, 6);
  EXPECT_EQ(plan.dims[1].src_stride, 4);
  EXPECT_EQ(plan.dims[1].dst_stride, 1);
  // Loops are ordered by the destination: a transposed destination puts its
  // unit-stride dim innermost.
  plan = PlanLoops({4, 6}, {6, 1}, {1, 4});
  ASSERT_EQ(plan.rank, 2);
  EXPECT_EQ(plan.dims[1].size, 4);
  EXPECT_EQ(plan.dims[1].dst_stride, 1);
  EXPECT_EQ(plan.dims[1].src_stride, 6);
  // Broadcast dims merge with each other.
  plan = PlanLoops({2, 3, 4}, {0, 0, 1}, {12, 4, 1});
  ASSERT_EQ(plan.rank, 2);
  EXPECT_EQ(plan.dims[0].size, 6);
  EXPECT_EQ(plan.dims[0].src_stride, 0);
  // All size 1: a single element.
  EXPECT_EQ(PlanLoops({1, 1}, {5, 7}, {1, 1}).rank, 0);
  EXPECT_EQ(PlanLoops({}, {}, {}).rank, 0);
}

}  // namespace
}  // namespace genesis::storage
