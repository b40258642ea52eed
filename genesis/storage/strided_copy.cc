#include "genesis/storage/strided_copy.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "genesis/core/absl_compat.h"
#include "genesis/core/parallel_for.h"
#include "genesis/core/status.h"
#include "genesis/storage/layout.h"

namespace genesis::storage {
namespace strided_internal {
namespace {

// Whether stepping `outer` once moves both views exactly as far as stepping
// through all of `inner`: then the two loops are one loop.
bool Continues(const LoopDim& outer, const LoopDim& inner) {
  int64_t src_span;
  int64_t dst_span;
  // An overflowing span cannot equal a stride.
  return !__builtin_mul_overflow(inner.size, inner.src_stride, &src_span) &&
         !__builtin_mul_overflow(inner.size, inner.dst_stride, &dst_span) &&
         outer.src_stride == src_span && outer.dst_stride == dst_span;
}

}  // namespace

LoopPlan PlanLoops(absl::Span<const int64_t> shape,
                   absl::Span<const int64_t> src_strides,
                   absl::Span<const int64_t> dst_strides) {
  LoopPlan plan;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    plan.dims[plan.rank++] = {shape[i], src_strides[i], dst_strides[i]};
  }
  // Order by decreasing destination stride, then decreasing source stride;
  // stable, so that equal dims keep their order.
  const auto outer_first = [](const LoopDim& a, const LoopDim& b) {
    return a.dst_stride != b.dst_stride ? a.dst_stride > b.dst_stride
                                        : a.src_stride > b.src_stride;
  };
  std::stable_sort(plan.dims.begin(), plan.dims.begin() + plan.rank,
                   outer_first);
  // Merge runs of dims that continue each other into one loop.
  int merged = 0;
  for (int k = 0; k < plan.rank; ++k) {
    LoopDim dim = plan.dims[k];
    while (k + 1 < plan.rank && Continues(dim, plan.dims[k + 1])) {
      const LoopDim& inner = plan.dims[++k];
      // The product is at most numel: no overflow.
      dim = {dim.size * inner.size, inner.src_stride, inner.dst_stride};
    }
    plan.dims[merged++] = dim;
  }
  plan.rank = merged;
  return plan;
}

absl::Status CheckSameShape(const Layout& src, const Layout& dst,
                            std::string_view function) {
  if (src.shape() == dst.shape()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      ToAbsl(function), ": source shape [", absl::StrJoin(src.shape(), ", "),
      "] differs from destination shape [", absl::StrJoin(dst.shape(), ", "),
      "]"));
}

absl::Status CheckWritable(const Layout& dst, std::string_view function) {
  // An empty destination is written nowhere, however it broadcasts.
  for (int d = 0; d < dst.rank() && dst.numel() > 0; ++d) {
    if (dst.stride(d) == 0 && dst.size(d) > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(ToAbsl(function), ": destination dim ", d,
                       " has stride 0 and size ", dst.size(d),
                       ", so several elements would be written to one "
                       "place (destination ",
                       dst.ToString(), ")"));
    }
  }
  return absl::OkStatus();
}

// Passes of this many bytes or more per thread may be shared among threads: below
// it, waking a worker costs more than it saves.
constexpr int64_t kMinBytesPerThread = int64_t{1} << 20;
// Parts along a transposed side start at multiples of this many items, so that
// only the copy's own edges go item by item.
constexpr int64_t kPartAlignItems = 64;

void ForEachPart(const LoopPlan& plan, int64_t bytes, int threads,
                 absl::FunctionRef<void(const LoopPlan& mine, int64_t begin)> part) {
  const int64_t outer = plan.rank > 0 ? plan.dims[0].size : 1;
  const int parts = static_cast<int>(std::min<int64_t>(
      {threads <= 0 ? HardwareThreads() : threads, bytes / kMinBytesPerThread, outer}));
  if (parts <= 1) return part(plan, 0);
  const int64_t align = outer >= parts * kPartAlignItems ? kPartAlignItems : 1;
  ParallelFor(parts, [&](int p) {
    const int64_t begin = outer * p / parts / align * align;
    const int64_t end = p + 1 == parts ? outer : outer * (p + 1) / parts / align * align;
    LoopPlan mine = plan;
    mine.dims[0].size = end - begin;
    part(mine, begin);
  });
}

}  // namespace strided_internal

namespace {

using strided_internal::ForEachOuter;
using strided_internal::LoopDim;
using strided_internal::LoopPlan;
using strided_internal::PlanLoops;

// A source stride (in bytes) from which every inner-loop read touches a new
// cache line, so tiling pays; also the line size the transposes align to.
constexpr int64_t kCacheLine = 64;

// Copies an item of sizeof(Word) to 2 * sizeof(Word) bytes as two
// overlapping words.
template <typename Word>
inline void CopyOverlapping(char* dst, const char* src, size_t size) {
  Word head;
  Word last;
  std::memcpy(&head, src, sizeof(Word));
  std::memcpy(&last, src + size - sizeof(Word), sizeof(Word));
  std::memcpy(dst, &head, sizeof(Word));
  std::memcpy(dst + size - sizeof(Word), &last, sizeof(Word));
}

// Copies an item of `size` bytes, a size not known at compile time: up to
// 16 bytes without calling memcpy.
inline void CopyBytes(char* dst, const char* src, size_t size) {
  if (size > 16) {
    std::memcpy(dst, src, size);
  } else if (size >= 8) {
    CopyOverlapping<uint64_t>(dst, src, size);
  } else if (size >= 4) {
    CopyOverlapping<uint32_t>(dst, src, size);
  } else if (size >= 2) {
    CopyOverlapping<uint16_t>(dst, src, size);
  } else {
    *dst = *src;
  }
}

// Moves one item. kSize > 0 is the item size known at compile time (a
// single load and store); kSize == 0 uses the runtime `size`.
template <size_t kSize>
inline void CopyItem(char* dst, const char* src, size_t size) {
  if constexpr (kSize > 0) {
    std::memcpy(dst, src, kSize);
  } else {
    CopyBytes(dst, src, size);
  }
}

// Copies n items with the given byte strides.
template <size_t kSize>
void CopyRow(const char* src, int64_t src_stride, char* dst, int64_t dst_stride,
             int64_t n, size_t size) {
  const int64_t item = static_cast<int64_t>(size);
  if (src_stride == item && dst_stride == item) {
    std::memcpy(dst, src, static_cast<size_t>(n) * size);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    CopyItem<kSize>(dst + i * dst_stride, src + i * src_stride, size);
  }
}

// Edge of the square tiles of CopyTiled: a 32 x 32 tile of 8-byte items is
// 8 KiB per side, well inside L1 together.
constexpr int64_t kTile = 32;

// Copies the outer.size x inner.size block of the two innermost loops in
// kTile x kTile tiles, so that the source lines a tile touches stay in cache
// while the tile is written.
template <size_t kSize>
void CopyTiled(const char* src, const LoopDim& outer, const LoopDim& inner,
               char* dst, size_t size) {
  const int64_t item = static_cast<int64_t>(size);
  const int64_t so = outer.src_stride * item;
  const int64_t do_ = outer.dst_stride * item;
  const int64_t si = inner.src_stride * item;
  const int64_t di = inner.dst_stride * item;
  for (int64_t ob = 0; ob < outer.size; ob += kTile) {
    const int64_t oe = std::min(ob + kTile, outer.size);
    for (int64_t ib = 0; ib < inner.size; ib += kTile) {
      const int64_t ie = std::min(ib + kTile, inner.size);
      for (int64_t o = ob; o < oe; ++o) {
        const char* s = src + o * so;
        char* d = dst + o * do_;
        for (int64_t i = ib; i < ie; ++i) {
          CopyItem<kSize>(d + i * di, s + i * si, size);
        }
      }
    }
  }
}

// Whether the innermost two loops should go through CopyTiled: the inner
// loop reads a new cache line per item, and the next loop out reads closer
// together, so a tile reuses the lines it loads.
bool UseTiles(const LoopPlan& plan, size_t size) {
  if (plan.rank < 2) return false;
  const LoopDim& outer = plan.dims[plan.rank - 2];
  const LoopDim& inner = plan.dims[plan.rank - 1];
  return inner.src_stride * static_cast<int64_t>(size) >= kCacheLine &&
         outer.src_stride < inner.src_stride;
}

// ---- Transposes.
//
// A transpose block is a rows x cols block of items of `size` bytes with
//   dst + r * dst_stride + c * size  <-  src + c * src_stride + r * size
// (strides in bytes): the source runs contiguously along r and the
// destination along c. It is copied in k x k squares, each read as k source
// rows of k items and written as k destination rows of k items, transposed
// in registers for items of 1, 2, 4, 8 and 16 bytes (SSE2; AVX2 for 4 and 8
// where the CPU has it) and item by item (k = 1) for other sizes.
//
// The squares go in strips. A strip is one cache line's worth of the
// columns of up to kStripSourceBytes / size destination rows (16 floats of
// 512 rows, say), so up to kStripSourceBytes of each of the source rows
// those columns come from, read forward; the strips go along the
// destination rows, then down. So the reads are long forward runs, each
// destination line is written whole at once, and nothing needs to stay in
// cache from one strip to the next. Where the destination rows are long and
// all start at the same offset within a cache line, the strips start at a
// line boundary (the columns before it go separately), and in big copies
// they write with non-temporal stores, through a small buffer that the
// squares of a line are transposed into: these neither read the
// destination lines before writing them nor push the source out of the
// caches. Small blocks in big copies (batches of small matrices) go in
// strips of whole rows instead. The rows and columns that do not fill a
// square are copied item by item.

// Bytes of each source row that a strip reads: in big copies (kStreamBytes and
// more, non-temporal stores), and in the others, whose destination stays in
// cache and competes with the strip's source lines for it. On the 2-core
// build machine shorter strips took a 1 MiB float32 transpose from 0.32-0.44
// of memcpy to 0.40-0.50 (three runs each); in big copies they cost a fifth.
constexpr int64_t kStripSourceBytes = 2048;
constexpr int64_t kCachedStripSourceBytes = 512;
// From this many bytes in all, transposes use non-temporal stores: below it
// the destination may stay in cache, and regular stores are faster.
constexpr int64_t kStreamBytes = int64_t{8} << 20;
// Destination rows from this long are aligned to cache lines (see
// CopyTransposeBlock).
constexpr int64_t kMinAlignedRowBytes = 1024;
// Transpose blocks of floats whose sides both have this many items or more, in copies
// below kStreamBytes, go in AVX-512's 16 x 16 squares where the CPU has it. On the
// 2-core build VM (AMD EPYC, 32 MiB of L3) they took a 1024 x 1024 transpose from 8-12
// to 15 GB/s and a 512 x 512 one from 18 to 21-24 GB/s, but a 256 x 256 one from 34 to
// 25-28, and in streamed copies they were no faster.
constexpr int64_t kMinWideSquareSide = 512;
// In copies of kStreamBytes or more, blocks up to this size are copied in
// strips of whole destination rows, which then are written nearly in order
// (the source lines stay in cache meanwhile).
constexpr int64_t kWholeRowBlockBytes = int64_t{64} << 10;

// Item movers for TransposeItems: items of kSize bytes; items of
// sizeof(Word) to 2 * sizeof(Word) bytes; items of any size.
template <size_t kSize>
struct MoveFixed {
  void operator()(char* dst, const char* src) const {
    std::memcpy(dst, src, kSize);
  }
};

template <typename Word>
struct MoveOverlapping {
  size_t size;
  void operator()(char* dst, const char* src) const {
    CopyOverlapping<Word>(dst, src, size);
  }
};

struct MoveAny {
  size_t size;
  void operator()(char* dst, const char* src) const {
    std::memcpy(dst, src, size);
  }
};

// Copies the rows x cols transpose block item by item with `move`, the inner
// loop along the shorter side so that the rows it reads or writes advance
// together.
template <typename Move>
void TransposeItems(const Move& move, const char* src, int64_t src_stride,
                    char* dst, int64_t dst_stride, int64_t rows, int64_t cols,
                    int64_t item) {
  if (cols <= rows) {
    for (int64_t r = 0; r < rows; ++r) {
      const char* s = src + r * item;
      char* d = dst + r * dst_stride;
      for (int64_t c = 0; c < cols; ++c) {
        move(d, s);
        s += src_stride;
        d += item;
      }
    }
  } else {
    for (int64_t c = 0; c < cols; ++c) {
      const char* s = src + c * src_stride;
      char* d = dst + c * item;
      for (int64_t r = 0; r < rows; ++r) {
        move(d, s);
        s += item;
        d += dst_stride;
      }
    }
  }
}

// TransposeItems with the mover for kSize (for `size`, if kSize is 0).
template <size_t kSize>
void CopyTransposeItems(const char* src, int64_t src_stride, char* dst,
                        int64_t dst_stride, int64_t rows, int64_t cols,
                        size_t size) {
  if (rows <= 0 || cols <= 0) return;
  const int64_t item = static_cast<int64_t>(size);
  if constexpr (kSize > 0) {
    TransposeItems(MoveFixed<kSize>{}, src, src_stride, dst, dst_stride, rows,
                   cols, item);
  } else if (size < 2) {
    TransposeItems(MoveFixed<1>{}, src, src_stride, dst, dst_stride, rows, cols,
                   item);
  } else if (size < 4) {
    TransposeItems(MoveOverlapping<uint16_t>{size}, src, src_stride, dst,
                   dst_stride, rows, cols, item);
  } else if (size < 8) {
    TransposeItems(MoveOverlapping<uint32_t>{size}, src, src_stride, dst,
                   dst_stride, rows, cols, item);
  } else if (size <= 16) {
    TransposeItems(MoveOverlapping<uint64_t>{size}, src, src_stride, dst,
                   dst_stride, rows, cols, item);
  } else {
    TransposeItems(MoveAny{size}, src, src_stride, dst, dst_stride, rows, cols,
                   item);
  }
}

// Copies a rows x cols transpose block whose rows and cols are multiples of
// the square edge (a strip); `size` is the item size.
using StripFn = void (*)(const char* src, int64_t src_stride, char* dst,
                         int64_t dst_stride, int64_t rows, int64_t cols,
                         size_t size);

// How to copy transpose blocks of one item size.
struct TransposeKernel {
  int64_t edge = 1;  // Of the squares.
  StripFn strip = nullptr;
  // With non-temporal stores; needs destination rows aligned to cache lines
  // at column 0. Null if there is none.
  StripFn stream_strip = nullptr;
};

#if defined(__SSE2__)

// The strip loops over squares of kSize-byte items, for a Square type with
//   kN: the edge of a square,
//   Run(src, src_stride, dst, dst_stride): copies one square,
//   Stream(dst, from, bytes): copies `bytes` (a multiple of the store
//     width) from the buffer `from` to `dst`, aligned to that width, with
//     non-temporal stores.
// With kStream, the squares of one destination line width go to a buffer of
// kN lines first, which is then streamed out line by line, so that each
// line is written whole at once (non-temporal stores combine in a few line
// buffers only, and lines written piecemeal would go out in pieces).
//
// Always inlined, so that the strip functions below can give it the target
// of their Square.
template <typename Square, size_t kSize, bool kStream>
__attribute__((always_inline)) inline void SquareStrip(
    const char* src, int64_t src_stride, char* dst, int64_t dst_stride,
    int64_t rows, int64_t cols) {
  constexpr int64_t kN = Square::kN;
  constexpr int64_t kItem = static_cast<int64_t>(kSize);
  if constexpr (kStream) {
    constexpr int64_t kLineItems = kCacheLine / kItem;
    static_assert(kLineItems % kN == 0);
    alignas(kCacheLine) char lines[kN * kCacheLine];
    for (int64_t r = 0; r < rows; r += kN) {
      for (int64_t c0 = 0; c0 < cols; c0 += kLineItems) {
        const int64_t n = std::min(kLineItems, cols - c0);
        for (int64_t c = 0; c < n; c += kN) {
          Square::Run(src + (c0 + c) * src_stride + r * kItem, src_stride,
                      lines + c * kItem, kCacheLine);
        }
        for (int64_t i = 0; i < kN; ++i) {
          Square::Stream(dst + (r + i) * dst_stride + c0 * kItem,
                         lines + i * kCacheLine, n * kItem);
        }
      }
    }
  } else {
    for (int64_t r = 0; r < rows; r += kN) {
      for (int64_t c = 0; c < cols; c += kN) {
        Square::Run(src + c * src_stride + r * kItem, src_stride,
                    dst + r * dst_stride + c * kItem, dst_stride);
      }
    }
  }
}

inline __m128i Load128(const char* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

inline void Stream128(char* dst, const char* from, int64_t bytes) {
  for (int64_t b = 0; b < bytes; b += 16) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + b), Load128(from + b));
  }
}

// Interleaves the kSize-byte lanes of the low (kHigh false) or high halves
// of a and b.
template <size_t kSize, bool kHigh>
inline __m128i Unpack(__m128i a, __m128i b) {
  if constexpr (kSize == 1) {
    return kHigh ? _mm_unpackhi_epi8(a, b) : _mm_unpacklo_epi8(a, b);
  } else if constexpr (kSize == 2) {
    return kHigh ? _mm_unpackhi_epi16(a, b) : _mm_unpacklo_epi16(a, b);
  } else if constexpr (kSize == 4) {
    return kHigh ? _mm_unpackhi_epi32(a, b) : _mm_unpacklo_epi32(a, b);
  } else {
    return kHigh ? _mm_unpackhi_epi64(a, b) : _mm_unpacklo_epi64(a, b);
  }
}

// 0 to kN - 1 (kN a power of 2), each with its log2(kN) bits reversed.
template <int kN>
constexpr std::array<int, kN> BitReversed() {
  std::array<int, kN> reversed{};
  for (int i = 0; i < kN; ++i) {
    for (int bit = 1; bit < kN; bit <<= 1) {
      reversed[i] = (reversed[i] << 1) | ((i & bit) != 0 ? 1 : 0);
    }
  }
  return reversed;
}

// SSE2 squares of 16 / kSize items of kSize (1, 2, 4 or 8) bytes, a row per
// register. A round of unpacks takes registers 2i and 2i + 1 to i (low
// halves interleaved) and i + kN/2 (high halves): writing a register's
// index and an item's lane in it as bits, a round moves the lowest index
// bit to the bottom of the lane and the top lane bit to the top of the
// index, so log2(kN) rounds transpose the square except that both indices
// come out bit-reversed, which the loads and stores undo by taking rows in
// bit-reversed order.
template <size_t kSize>
struct SquareSse2 {
  static constexpr int64_t kN = 16 / kSize;

  __attribute__((always_inline)) static inline void Run(const char* src,
                                                        int64_t src_stride,
                                                        char* dst,
                                                        int64_t dst_stride) {
    static constexpr std::array<int, kN> kOrder = BitReversed<kN>();
    __m128i a[kN];
    __m128i b[kN];
#pragma GCC unroll 16
    for (int i = 0; i < kN; ++i) a[i] = Load128(src + kOrder[i] * src_stride);
#pragma GCC unroll 4
    for (int round = 1; round < kN; round <<= 1) {
#pragma GCC unroll 8
      for (int i = 0; i < kN / 2; ++i) {
        b[i] = Unpack<kSize, false>(a[2 * i], a[2 * i + 1]);
        b[i + kN / 2] = Unpack<kSize, true>(a[2 * i], a[2 * i + 1]);
      }
#pragma GCC unroll 16
      for (int i = 0; i < kN; ++i) a[i] = b[i];
    }
#pragma GCC unroll 16
    for (int i = 0; i < kN; ++i) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + kOrder[i] * dst_stride),
                       a[i]);
    }
  }

  __attribute__((always_inline)) static inline void Stream(char* dst,
                                                           const char* from,
                                                           int64_t bytes) {
    Stream128(dst, from, bytes);
  }
};

// 16-byte items: squares of one, a register each.
struct SquareSse2Wide {
  static constexpr int64_t kN = 1;

  __attribute__((always_inline)) static inline void Run(const char* src,
                                                        int64_t, char* dst,
                                                        int64_t) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), Load128(src));
  }

  __attribute__((always_inline)) static inline void Stream(char* dst,
                                                           const char* from,
                                                           int64_t bytes) {
    Stream128(dst, from, bytes);
  }
};

template <typename Square, size_t kSize, bool kStream>
void StripSse2(const char* src, int64_t src_stride, char* dst,
               int64_t dst_stride, int64_t rows, int64_t cols, size_t) {
  SquareStrip<Square, kSize, kStream>(src, src_stride, dst, dst_stride, rows,
                                      cols);
}

// AVX2 squares of 32 / kSize items of kSize (4 or 8) bytes, a row per
// register; the CPU is checked at run time. (Not always_inline: GCC inlines
// across targets only into AVX2 callers, which SquareStrip becomes once
// inlined into StripAvx2.)
template <size_t kSize>
struct SquareAvx2 {
  static constexpr int64_t kN = 32 / kSize;

  __attribute__((target("avx2"))) static inline __m256i Load(const char* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  }

  __attribute__((target("avx2"))) static inline void Store(char* p, __m256i v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v);
  }

  __attribute__((target("avx2"))) static inline void Run(const char* src,
                                                         int64_t ss, char* dst,
                                                         int64_t ds) {
    if constexpr (kSize == 4) {
      const __m256i r0 = Load(src);
      const __m256i r1 = Load(src + ss);
      const __m256i r2 = Load(src + 2 * ss);
      const __m256i r3 = Load(src + 3 * ss);
      const __m256i r4 = Load(src + 4 * ss);
      const __m256i r5 = Load(src + 5 * ss);
      const __m256i r6 = Load(src + 6 * ss);
      const __m256i r7 = Load(src + 7 * ss);
      // Within each 128-bit half: pairs of rows, then quads, so that half
      // h of u_j holds column j + 4h of rows 0-3 (u0-u3) or 4-7 (u4-u7).
      const __m256i t0 = _mm256_unpacklo_epi32(r0, r1);
      const __m256i t1 = _mm256_unpackhi_epi32(r0, r1);
      const __m256i t2 = _mm256_unpacklo_epi32(r2, r3);
      const __m256i t3 = _mm256_unpackhi_epi32(r2, r3);
      const __m256i t4 = _mm256_unpacklo_epi32(r4, r5);
      const __m256i t5 = _mm256_unpackhi_epi32(r4, r5);
      const __m256i t6 = _mm256_unpacklo_epi32(r6, r7);
      const __m256i t7 = _mm256_unpackhi_epi32(r6, r7);
      const __m256i u0 = _mm256_unpacklo_epi64(t0, t2);
      const __m256i u1 = _mm256_unpackhi_epi64(t0, t2);
      const __m256i u2 = _mm256_unpacklo_epi64(t1, t3);
      const __m256i u3 = _mm256_unpackhi_epi64(t1, t3);
      const __m256i u4 = _mm256_unpacklo_epi64(t4, t6);
      const __m256i u5 = _mm256_unpackhi_epi64(t4, t6);
      const __m256i u6 = _mm256_unpacklo_epi64(t5, t7);
      const __m256i u7 = _mm256_unpackhi_epi64(t5, t7);
      // Then the halves: column j's rows 0-3 and 4-7.
      Store(dst, _mm256_permute2x128_si256(u0, u4, 0x20));
      Store(dst + ds, _mm256_permute2x128_si256(u1, u5, 0x20));
      Store(dst + 2 * ds, _mm256_permute2x128_si256(u2, u6, 0x20));
      Store(dst + 3 * ds, _mm256_permute2x128_si256(u3, u7, 0x20));
      Store(dst + 4 * ds, _mm256_permute2x128_si256(u0, u4, 0x31));
      Store(dst + 5 * ds, _mm256_permute2x128_si256(u1, u5, 0x31));
      Store(dst + 6 * ds, _mm256_permute2x128_si256(u2, u6, 0x31));
      Store(dst + 7 * ds, _mm256_permute2x128_si256(u3, u7, 0x31));
    } else {
      static_assert(kSize == 8);
      const __m256i r0 = Load(src);
      const __m256i r1 = Load(src + ss);
      const __m256i r2 = Load(src + 2 * ss);
      const __m256i r3 = Load(src + 3 * ss);
      // Half h of t_j holds column j + 2h of rows 0-1 (t0, t1) or 2-3.
      const __m256i t0 = _mm256_unpacklo_epi64(r0, r1);
      const __m256i t1 = _mm256_unpackhi_epi64(r0, r1);
      const __m256i t2 = _mm256_unpacklo_epi64(r2, r3);
      const __m256i t3 = _mm256_unpackhi_epi64(r2, r3);
      Store(dst, _mm256_permute2x128_si256(t0, t2, 0x20));
      Store(dst + ds, _mm256_permute2x128_si256(t1, t3, 0x20));
      Store(dst + 2 * ds, _mm256_permute2x128_si256(t0, t2, 0x31));
      Store(dst + 3 * ds, _mm256_permute2x128_si256(t1, t3, 0x31));
    }
  }

  __attribute__((target("avx2"))) static inline void Stream(char* dst,
                                                            const char* from,
                                                            int64_t bytes) {
    for (int64_t b = 0; b < bytes; b += 32) {
      _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + b), Load(from + b));
    }
  }
};

template <typename Square, size_t kSize, bool kStream>
__attribute__((target("avx2"))) void StripAvx2(const char* src,
                                               int64_t src_stride, char* dst,
                                               int64_t dst_stride, int64_t rows,
                                               int64_t cols, size_t) {
  SquareStrip<Square, kSize, kStream>(src, src_stride, dst, dst_stride, rows,
                                      cols);
}

// AVX-512 squares of 16 x 16 floats, a row per register: each reads one whole cache
// line of each of 16 source rows and writes one whole line of each of 16 destination
// rows. With 8 x 8 squares every line is read or written in halves by two squares, and
// between them the 16 lines of a strip's rows, which lie a power of two apart in a
// square matrix (4 KiB for 1024 floats), fall in one L1 set and evict each other.
// Unpacks pair the rows' 32-bit items, then their 64-bit pairs, within each 128-bit
// lane; two rounds of 128-bit lane shuffles then transpose the 4 x 4 lanes.
// GCC 12's AVX-512 shuffle intrinsics start from _mm512_undefined_ps, which
// -Wuninitialized reports in optimised builds.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
struct SquareAvx512Float {
  static constexpr int64_t kN = 16;

  __attribute__((target("avx512f"))) static inline __m512 Load(const char* p) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(p));
  }

  __attribute__((target("avx512f"))) static inline void Run(const char* src, int64_t ss,
                                                            char* dst, int64_t ds) {
    __m512 u[16];
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      // Rows 4g .. 4g + 3: u[4g + j], lane k, holds column 4k + j of them.
      const __m512 r0 = Load(src + (4 * g) * ss);
      const __m512 r1 = Load(src + (4 * g + 1) * ss);
      const __m512 r2 = Load(src + (4 * g + 2) * ss);
      const __m512 r3 = Load(src + (4 * g + 3) * ss);
      const __m512 t0 = _mm512_unpacklo_ps(r0, r1);
      const __m512 t1 = _mm512_unpackhi_ps(r0, r1);
      const __m512 t2 = _mm512_unpacklo_ps(r2, r3);
      const __m512 t3 = _mm512_unpackhi_ps(r2, r3);
      u[4 * g] = _mm512_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
      u[4 * g + 1] = _mm512_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
      u[4 * g + 2] = _mm512_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
      u[4 * g + 3] = _mm512_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      // Lane k of the four row groups' u[4g + j], in group order, is destination row
      // 4k + j.
      const __m512 p = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x88);       // A0 A2 B0 B2
      const __m512 q = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xDD);       // A1 A3 B1 B3
      const __m512 r = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x88);  // C0 C2 D0 D2
      const __m512 s = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xDD);  // C1 C3 D1 D3
      Store(dst + j * ds, _mm512_shuffle_f32x4(p, r, 0x88));
      Store(dst + (4 + j) * ds, _mm512_shuffle_f32x4(q, s, 0x88));
      Store(dst + (8 + j) * ds, _mm512_shuffle_f32x4(p, r, 0xDD));
      Store(dst + (12 + j) * ds, _mm512_shuffle_f32x4(q, s, 0xDD));
    }
  }

  __attribute__((target("avx512f"))) static inline void Store(char* p, __m512 v) {
    _mm512_storeu_ps(reinterpret_cast<float*>(p), v);
  }

  __attribute__((target("avx512f"))) static inline void Stream(char* dst, const char* from,
                                                               int64_t bytes) {
    for (int64_t b = 0; b < bytes; b += 64) {
      _mm512_stream_ps(reinterpret_cast<float*>(dst + b), Load(from + b));
    }
  }
};

template <typename Square, size_t kSize, bool kStream>
__attribute__((target("avx512f"))) void StripAvx512(const char* src, int64_t src_stride,
                                                    char* dst, int64_t dst_stride,
                                                    int64_t rows, int64_t cols, size_t) {
  SquareStrip<Square, kSize, kStream>(src, src_stride, dst, dst_stride, rows, cols);
}

#pragma GCC diagnostic pop

bool HasAvx512() {
  static const bool has_avx512 = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
  }();
  return has_avx512;
}

bool HasAvx2() {
  static const bool has_avx2 = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return has_avx2;
}

#endif  // defined(__SSE2__)

// The transpose kernel for items of kSize bytes (of `size` if kSize is 0); with `wide`,
// the 16 x 16 float squares where the CPU has AVX-512.
template <size_t kSize>
TransposeKernel KernelFor(size_t size, bool wide) {
#if defined(__SSE2__)
  if constexpr (kSize == 4) {
    if (wide && HasAvx512()) {
      return {SquareAvx512Float::kN, &StripAvx512<SquareAvx512Float, kSize, false>,
              &StripAvx512<SquareAvx512Float, kSize, true>};
    }
  }
  if constexpr (kSize == 4 || kSize == 8) {
    using Square = SquareAvx2<kSize>;
    if (HasAvx2()) {
      return {Square::kN, &StripAvx2<Square, kSize, false>,
              &StripAvx2<Square, kSize, true>};
    }
  }
  if constexpr (kSize == 1 || kSize == 2 || kSize == 4 || kSize == 8) {
    using Square = SquareSse2<kSize>;
    return {Square::kN, &StripSse2<Square, kSize, false>,
            &StripSse2<Square, kSize, true>};
  }
  if constexpr (kSize == 16) {
    return {1, &StripSse2<SquareSse2Wide, kSize, false>,
            &StripSse2<SquareSse2Wide, kSize, true>};
  }
#endif
  return {1, &CopyTransposeItems<kSize>, nullptr};
}

// Copies a rows x cols transpose block (see above) with `kernel`; `stream`
// allows non-temporal stores, which the caller must fence.
template <size_t kSize>
void CopyTransposeBlock(const TransposeKernel& kernel, const char* src,
                        int64_t src_stride, char* dst, int64_t dst_stride,
                        int64_t rows, int64_t cols, size_t size, bool stream) {
  const int64_t item = static_cast<int64_t>(size);
  const int64_t k = kernel.edge;
  // If the destination rows are long and all start at the same offset
  // within a cache line, with an item starting at the next line boundary
  // (column c_begin), the strips start there, so that they write whole
  // lines; the columns before go in squares with regular stores as far as
  // they fill squares. (Short rows are not worth the columns left over.)
  const auto address = reinterpret_cast<uintptr_t>(dst);
  const auto line = static_cast<uintptr_t>(kCacheLine);
  const bool aligned = cols * item >= kMinAlignedRowBytes &&
                       dst_stride % kCacheLine == 0 && kCacheLine % item == 0 &&
                       address % size == 0;
  const int64_t to_line = static_cast<int64_t>((line - address % line) % line);
  const int64_t c_begin = aligned ? std::min(cols, to_line / item) : 0;
  // The squares cover columns [c_head, c_end) and rows [0, r_end).
  const int64_t c_head = c_begin % k;
  const int64_t c_end = c_begin + (cols - c_begin) / k * k;
  const int64_t r_end = rows / k * k;
  // A strip: a cache line of each destination row (at least 4 items),
  // rounded up to whole squares, or for a small block in a big copy all of
  // each row; by k(Cached)StripSourceBytes of each source row, rounded down. Strips
  // after c_begin start on line boundaries.
  const int64_t strip_cols =
      stream && rows * cols * item <= kWholeRowBlockBytes
          ? std::max<int64_t>(c_end - c_begin, 1)
          : (std::max<int64_t>((kCacheLine + item - 1) / item, 4) + k - 1) / k *
                k;
  const int64_t strip_rows =
      std::max<int64_t>((stream ? kStripSourceBytes : kCachedStripSourceBytes) / item / k, 1) *
      k;
  const bool streamed = stream && aligned && kernel.stream_strip != nullptr;
  for (int64_t r = 0; r < r_end; r += strip_rows) {
    const int64_t nr = std::min(strip_rows, r_end - r);
    if (c_head < c_begin) {
      kernel.strip(src + c_head * src_stride + r * item, src_stride,
                   dst + r * dst_stride + c_head * item, dst_stride, nr,
                   c_begin - c_head, size);
    }
    for (int64_t c = c_begin; c < c_end; c += strip_cols) {
      const int64_t nc = std::min(strip_cols, c_end - c);
      (streamed ? kernel.stream_strip : kernel.strip)(
          src + c * src_stride + r * item, src_stride,
          dst + r * dst_stride + c * item, dst_stride, nr, nc, size);
    }
  }
  // What the squares left: the leading and trailing columns of all rows,
  // then the last rows of the columns between.
  CopyTransposeItems<kSize>(src, src_stride, dst, dst_stride, rows, c_head,
                            size);
  CopyTransposeItems<kSize>(src + c_end * src_stride, src_stride,
                            dst + c_end * item, dst_stride, rows, cols - c_end,
                            size);
  CopyTransposeItems<kSize>(src + c_head * src_stride + r_end * item,
                            src_stride,
                            dst + r_end * dst_stride + c_head * item,
                            dst_stride, rows - r_end, c_end - c_head, size);
}

// If the innermost loop of the plan writes contiguously but does not read
// contiguously, and another loop reads contiguously, copies the plan as
// transpose blocks of those two loops (one per combination of indices of
// the others) and returns true; otherwise returns false, copying nothing.
// `plan` is `whole`, or a part of it along dims[0] (a thread's share): the
// kernel and non-temporal stores are chosen for the whole copy, so that
// every part copies as the whole would.
template <size_t kSize>
bool RunTransposes(const LoopPlan& plan, const LoopPlan& whole, const char* src,
                   char* dst, size_t size) {
  if (plan.rank < 2) return false;
  const LoopDim& inner = plan.dims[plan.rank - 1];
  // Items of a cache line or more are whole lines already: the general
  // loops do as well.
  if (size >= static_cast<size_t>(kCacheLine)) return false;
  if (inner.dst_stride != 1 || inner.src_stride == 1) return false;
  int across = plan.rank - 2;
  while (across >= 0 && plan.dims[across].src_stride != 1) --across;
  if (across < 0) return false;
  const LoopDim& outer = plan.dims[across];
  // The other loops, in their order, around the blocks.
  LoopPlan others;
  int64_t numel = 1;
  for (int d = 0; d < plan.rank; ++d) {
    numel *= whole.dims[d].size;
    if (d != across && d != plan.rank - 1) {
      others.dims[others.rank++] = plan.dims[d];
    }
  }
  const int64_t item = static_cast<int64_t>(size);
  const bool stream = numel * item >= kStreamBytes;
  const TransposeKernel kernel = KernelFor<kSize>(
      size, !stream && std::min(whole.dims[across].size, inner.size) >= kMinWideSquareSide);
  // Too small for one square: leave it to the general loops.
  if (outer.size < kernel.edge || inner.size < kernel.edge) return false;
  ForEachOuter(
      others, others.rank, src, size, dst, size, [&](const char* s, char* d) {
        CopyTransposeBlock<kSize>(kernel, s, inner.src_stride * item, d,
                                  outer.dst_stride * item, outer.size,
                                  inner.size, size, stream);
      });
#if defined(__SSE2__)
  // Non-temporal stores are weakly ordered: fence them before whatever
  // comes next (such as another thread reading the destination).
  if (stream) _mm_sfence();
#endif
  return true;
}

// Copies `plan`, a part of `whole` along dims[0] or all of it (RunTransposes).
template <size_t kSize>
void RunPlan(const LoopPlan& plan, const LoopPlan& whole, const char* src, char* dst,
             size_t size) {
  if (plan.rank == 0) {
    CopyItem<kSize>(dst, src, size);
    return;
  }
  if (RunTransposes<kSize>(plan, whole, src, dst, size)) return;
  const int64_t item = static_cast<int64_t>(size);
  if (UseTiles(plan, size)) {
    const LoopDim& outer = plan.dims[plan.rank - 2];
    const LoopDim& inner = plan.dims[plan.rank - 1];
    ForEachOuter(plan, plan.rank - 2, src, size, dst, size,
                 [&](const char* s, char* d) {
                   CopyTiled<kSize>(s, outer, inner, d, size);
                 });
    return;
  }
  const LoopDim& inner = plan.dims[plan.rank - 1];
  ForEachOuter(plan, plan.rank - 1, src, size, dst, size,
               [&](const char* s, char* d) {
                 CopyRow<kSize>(s, inner.src_stride * item, d,
                                inner.dst_stride * item, inner.size, size);
               });
}

// RunPlan for the item size.
void RunPlanOfSize(const LoopPlan& plan, const LoopPlan& whole, const char* src, char* dst,
                   size_t size) {
  switch (size) {
    case 1:
      return RunPlan<1>(plan, whole, src, dst, size);
    case 2:
      return RunPlan<2>(plan, whole, src, dst, size);
    case 4:
      return RunPlan<4>(plan, whole, src, dst, size);
    case 8:
      return RunPlan<8>(plan, whole, src, dst, size);
    case 16:
      return RunPlan<16>(plan, whole, src, dst, size);
    default:
      return RunPlan<0>(plan, whole, src, dst, size);
  }
}

// The copy behind every public function, for a non-empty shape: `src` and
// `dst` point at the first element of each view (offsets applied). Shared among
// up to `threads` threads (strided_copy.h) in parts along the outermost loop.
void CopyElements(const char* src, absl::Span<const int64_t> src_strides,
                  char* dst, absl::Span<const int64_t> dst_strides,
                  absl::Span<const int64_t> shape, size_t size, int threads) {
  const LoopPlan plan = PlanLoops(shape, src_strides, dst_strides);
  int64_t bytes = static_cast<int64_t>(size);
  for (int d = 0; d < plan.rank; ++d) bytes *= plan.dims[d].size;
  const int64_t item = static_cast<int64_t>(size);
  strided_internal::ForEachPart(plan, bytes, threads, [&](const LoopPlan& mine, int64_t begin) {
    const LoopDim& split = plan.dims[0];
    RunPlanOfSize(mine, plan, src + begin * split.src_stride * item,
                  dst + begin * split.dst_stride * item, size);
  });
}

// Row-major strides for the shape of the non-empty `layout` (the contiguous
// side of a copy). Each is at most numel, so none overflows.
std::array<int64_t, kMaxDims> RowMajor(const Layout& layout) {
  std::array<int64_t, kMaxDims> strides{};
  int64_t stride = 1;
  for (int i = layout.rank() - 1; i >= 0; --i) {
    strides[i] = stride;
    stride *= layout.size(i);
  }
  return strides;
}

const char* At(const void* base, const Layout& layout, size_t size) {
  return static_cast<const char*>(base) +
         layout.offset() * static_cast<int64_t>(size);
}

char* At(void* base, const Layout& layout, size_t size) {
  return static_cast<char*>(base) +
         layout.offset() * static_cast<int64_t>(size);
}

}  // namespace

void CopyStridedToContiguous(const void* base, const Layout& src,
                             size_t item_size, void* dst, int threads) {
  if (src.numel() == 0) return;
  const std::array<int64_t, kMaxDims> dst_strides = RowMajor(src);
  CopyElements(At(base, src, item_size), src.strides(), static_cast<char*>(dst),
               absl::MakeConstSpan(dst_strides.data(), src.strides().size()),
               src.shape(), item_size, threads);
}

void CopyContiguousToStrided(const void* src, const Layout& dst,
                             size_t item_size, void* dst_base, int threads) {
  if (dst.numel() == 0) return;
  const std::array<int64_t, kMaxDims> src_strides = RowMajor(dst);
  CopyElements(static_cast<const char*>(src),
               absl::MakeConstSpan(src_strides.data(), dst.strides().size()),
               At(dst_base, dst, item_size), dst.strides(), dst.shape(),
               item_size, threads);
}

absl::Status CopyStrided(const void* src_base, const Layout& src,
                         void* dst_base, const Layout& dst, size_t item_size,
                         int threads) {
  GENESIS_RETURN_IF_ERROR(
      strided_internal::CheckSameShape(src, dst, "CopyStrided"));
  if (item_size == 0) {
    return absl::InvalidArgumentError("CopyStrided: item_size = 0");
  }
  GENESIS_RETURN_IF_ERROR(strided_internal::CheckWritable(dst, "CopyStrided"));
  if (src.numel() == 0) return absl::OkStatus();  // Buffers may be null.
  CopyElements(At(src_base, src, item_size), src.strides(),
               At(dst_base, dst, item_size), dst.strides(), src.shape(),
               item_size, threads);
  return absl::OkStatus();
}

}  // namespace genesis::storage
