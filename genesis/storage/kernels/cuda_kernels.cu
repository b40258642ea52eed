// The kernels of cuda_kernels.h and the host code that checks arguments,
// plans the walk over the buffers (kernel_plan.h) and launches them.
//
// Kernel families:
//   * ContiguousKernel: conversions of contiguous views with 16-byte vector
//     loads and stores, one kernel per pair of distinct dtypes (90).
//   * TiledKernel: batches of 2-D transposes through padded shared-memory
//     tiles, reading along the source's short stride and writing along the
//     destination's.
//   * StridedKernel: any views; offsets from each unit's linear index, in
//     32-bit arithmetic where the pass fits.
// plus FillKernel and ArangeKernel. The tiled and strided kernels are
// templated over what they read (a word of a copy, or a source dtype) and
// take the destination dtype of a conversion at run time (ConvertFromOp: the
// same branch for every thread): ten kernels per family instead of ninety
// keeps the device code small (each kernel costs ~10 KB of it) at the price
// of a uniform branch per element. Grids cover the work with one item per
// thread up to kMaxBlocks blocks, and loop beyond; those loops are not
// unrolled, for the same reason.
//
// Must be compiled without flush-to-zero (nvcc's default): conversions to
// float32 / float64 produce subnormals (device_convert.h).
#include "genesis/storage/kernels/cuda_kernels.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "genesis/core/absl_compat.h"
#include "genesis/core/dtype.h"
#include "genesis/core/status.h"
#include "genesis/cuda/internal/check.h"
#include "genesis/storage/kernels/device_convert.h"
#include "genesis/storage/kernels/dtype_dispatch.h"
#include "genesis/storage/kernels/fill.h"
#include "genesis/storage/kernels/kernel_plan.h"
#include "genesis/storage/layout.h"
#include "genesis/storage/strided_copy.h"

namespace genesis::storage::kernels {
namespace {

using internal::FillPlan;
using internal::kTile;
using internal::kTileRows;
using internal::kVectorBytes;
using internal::Pass;
using internal::PassDims;
using internal::PassKind;
using internal::TilePlan;
using internal::VectorSplit;

constexpr int kThreads = 256;
// Grids grow to this many blocks; past it each thread loops over several
// items.
constexpr int64_t kMaxBlocks = int64_t{1} << 16;

static_assert(sizeof(uint4) == kVectorBytes);

// Blocks for `items` work items, `per_block` to a block.
unsigned BlocksFor(int64_t items, int64_t per_block = kThreads) {
  return static_cast<unsigned>(
      std::clamp<int64_t>((items + per_block - 1) / per_block, 1, kMaxBlocks));
}

// The index of the calling thread in the grid, and the grid's thread count.
__device__ inline int64_t GlobalThread() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t GridThreads() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

// ---- Element operations.

// Converts a stored From element to a stored To element: the operation of
// ContiguousKernel.
template <typename From, typename To>
struct ConvertOp {
  using Src = StorageOf<From>;
  using Dst = StorageOf<To>;
  __device__ Dst operator()(Src value) const {
    return ConvertStored<From, To>(value);
  }
};

// What the tiled and strided kernels do with each unit they read: store it
// (op(unit, dst, at) writes element `at` of dst).

// Stores a word unchanged.
template <typename Word>
struct CopyOp {
  using Src = Word;
  template <typename Index>
  __device__ void operator()(Word word, void* dst, Index at) const {
    static_cast<Word*>(dst)[at] = word;
  }
};

// Stores a From element converted to the dtype `to` (a distinct dtype).
template <typename From>
struct ConvertFromOp {
  using Src = StorageOf<From>;
  DType to;
  template <typename Index>
  __device__ void operator()(Src value, void* dst, Index at) const {
    CallForDType(to, [&]<typename To>(TypeTag<To>) {
      if constexpr (!std::is_same_v<From, To>) {
        static_cast<StorageOf<To>*>(dst)[at] = ConvertStored<From, To>(value);
      }
    });
  }
};

// kCount elements of T seen as kVectorBytes words, for vector loads and
// stores.
template <typename T, int kCount>
union Vector {
  static constexpr int kWords = kCount * sizeof(T) / kVectorBytes;
  static_assert(kWords * kVectorBytes == kCount * sizeof(T));
  T elems[kCount];
  uint4 words[kWords];
};

// ---- Kernels.

// Units [0, numel) of a contiguous conversion: split.vectors aligned vectors
// of kVec elements from split.head on, the head and the tail one by one.
template <typename Op, int kVec>
__global__ void __launch_bounds__(kThreads)
    ContiguousKernel(const typename Op::Src* __restrict__ src,
                     typename Op::Dst* __restrict__ dst, int64_t numel,
                     VectorSplit split, Op op) {
  using In = Vector<typename Op::Src, kVec>;
  using Out = Vector<typename Op::Dst, kVec>;
  const int64_t thread = GlobalThread();
  const uint4* in = reinterpret_cast<const uint4*>(src + split.head);
  uint4* out = reinterpret_cast<uint4*>(dst + split.head);
#pragma unroll 1  // Grids cover the work at once up to kMaxBlocks blocks.
  for (int64_t v = thread; v < split.vectors; v += GridThreads()) {
    In a;
#pragma unroll
    for (int w = 0; w < In::kWords; ++w) a.words[w] = in[v * In::kWords + w];
    Out b;
#pragma unroll
    for (int k = 0; k < kVec; ++k) b.elems[k] = op(a.elems[k]);
#pragma unroll
    for (int w = 0; w < Out::kWords; ++w) out[v * Out::kWords + w] = b.words[w];
  }
  // Fewer than kVec elements each, so the first threads of the grid do them.
  const int64_t tail = split.head + split.vectors * kVec;
  if (thread < split.head) dst[thread] = op(src[thread]);
  if (thread < numel - tail) dst[tail + thread] = op(src[tail + thread]);
}

// Any pass: unit i goes from src[s] to dst[d], (s, d) = OffsetsOf(i). The
// dims are indexed at run time, so the block reads them from shared memory.
template <typename Op, typename Index>
__global__ void __launch_bounds__(kThreads)
    StridedKernel(const typename Op::Src* __restrict__ src,
                  void* __restrict__ dst, Index numel, PassDims<Index> dims,
                  Op op) {
  __shared__ PassDims<Index> shared_dims;
  if (threadIdx.x == 0) shared_dims = dims;
  __syncthreads();
  // Both fit Index: numel does, and the grid has fewer than 2^31 threads.
  const Index step = static_cast<Index>(GridThreads());
#pragma unroll 1
  for (Index i = static_cast<Index>(GlobalThread()); i < numel; i += step) {
    Index s;
    Index d;
    internal::OffsetsOf(shared_dims, shared_dims.rank, i, &s, &d);
    op(src[s], dst, d);
  }
}

// A tiled pass, one kTile x kTile tile per block at a time. Threads read
// tile rows with consecutive threadIdx.x (the source's short stride), and
// write columns with consecutive threadIdx.x (the destination's); the
// padding column puts a tile's columns in distinct shared-memory banks.
// The plan's batch dims are indexed at run time, so TileAt reads a copy in
// shared memory.
template <typename Op>
__global__ void __launch_bounds__(kTile* kTileRows)
    TiledKernel(const typename Op::Src* __restrict__ src,
                void* __restrict__ dst, TilePlan plan, Op op) {
  __shared__ typename Op::Src tile[kTile][kTile + 1];
  __shared__ TilePlan shared_plan;
  const int tx = threadIdx.x;
  const int ty = threadIdx.y;
  if (tx == 0 && ty == 0) shared_plan = plan;
  __syncthreads();
#pragma unroll 1
  for (uint64_t t = blockIdx.x; t < plan.count; t += gridDim.x) {
    int64_t src_origin;
    int64_t dst_origin;
    int64_t row0;
    int64_t col0;
    internal::TileAt(shared_plan, t, &src_origin, &dst_origin, &row0, &col0);
    if (row0 + tx < plan.rows) {
      const typename Op::Src* from =
          src + src_origin + (row0 + tx) * plan.src_row_stride;
#pragma unroll
      for (int k = 0; k < kTile / kTileRows; ++k) {
        const int j = ty + k * kTileRows;
        if (col0 + j < plan.cols) {
          tile[j][tx] = from[(col0 + j) * plan.src_col_stride];
        }
      }
    }
    __syncthreads();
    if (col0 + tx < plan.cols) {
      const int64_t to = dst_origin + (col0 + tx) * plan.dst_col_stride;
#pragma unroll
      for (int k = 0; k < kTile / kTileRows; ++k) {
        const int j = ty + k * kTileRows;
        if (row0 + j < plan.rows) {
          op(tile[tx][j], dst, to + (row0 + j) * plan.dst_row_stride);
        }
      }
    }
    __syncthreads();  // The tile is rewritten next round.
  }
}

// plan.bytes bytes of a repeated pattern: aligned 16-byte stores of
// plan.line, the unaligned head and the tail byte by byte.
__global__ void __launch_bounds__(kThreads)
    FillKernel(uint8_t* __restrict__ dst, FillPlan plan) {
  const int64_t thread = GlobalThread();
  const uint4 line =
      make_uint4(plan.line[0], plan.line[1], plan.line[2], plan.line[3]);
  uint4* body = reinterpret_cast<uint4*>(dst + plan.head);
#pragma unroll 1
  for (int64_t v = thread; v < plan.vectors; v += GridThreads()) {
    body[v] = line;
  }
  const int64_t tail =
      plan.head + plan.vectors * static_cast<int64_t>(kVectorBytes);
  if (thread < plan.head) dst[thread] = internal::FillByte(plan, thread);
  if (thread < plan.bytes - tail) {
    dst[tail + thread] = internal::FillByte(plan, tail + thread);
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    ArangeKernel(StorageOf<T>* __restrict__ dst, int64_t numel, double start,
                 double step) {
#pragma unroll 1
  for (int64_t i = GlobalThread(); i < numel; i += GridThreads()) {
    dst[i] = ConvertStored<double, T>(ArangeValue(start, step, i));
  }
}

// ---- Host side.

// The outcome of the launch just made: OK, or its CUDA error as a status
// saying which function launched what (describe() names the kernel; it runs
// only on failure).
template <typename Describe>
absl::Status LaunchStatus(std::string_view function, Describe describe) {
  const cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return absl::OkStatus();
  return cuda::CudaStatus(
      err, absl::StrCat(ToAbsl(function), ": launching ", describe()));
}

uintptr_t Address(const void* pointer) {
  return reinterpret_cast<uintptr_t>(pointer);
}

// InvalidArgument unless both bases are non-null or the views are empty.
absl::Status CheckBases(const void* src_base, const void* dst_base,
                        int64_t numel, std::string_view function) {
  if (numel == 0 || (src_base != nullptr && dst_base != nullptr)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      ToAbsl(function), ": ", src_base == nullptr ? "src_base" : "dst_base",
      " is null but the views have ", numel, " elements"));
}

// InvalidArgument unless `pointer` (the argument `argument`, holding
// elements of `dtype`) is aligned to the element size.
absl::Status CheckAligned(const void* pointer, DType dtype,
                          std::string_view function,
                          std::string_view argument) {
  if (Address(pointer) % ItemSize(dtype) == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      ToAbsl(function), ": ", ToAbsl(argument), " = 0x",
      absl::Hex(Address(pointer)), " is not aligned to ", ItemSize(dtype),
      " bytes, the size of a ", ToAbsl(DTypeName(dtype)), " element"));
}

// Launches the tiled or strided kernel of a pass, storing with `op` (a
// kContiguous pass runs as a strided one).
template <typename Op>
void LaunchStrided(const Pass& pass, const void* src, void* dst, Op op,
                   cudaStream_t stream) {
  const auto* from = static_cast<const typename Op::Src*>(src);
  if (pass.kind == PassKind::kTiled) {
    const TilePlan tiles = internal::PlanTiles(pass.dims);
    TiledKernel<Op>
        <<<BlocksFor(static_cast<int64_t>(tiles.count), 1),
           dim3(kTile, kTileRows), 0, stream>>>(from, dst, tiles, op);
  } else if (pass.fits_32bit) {
    StridedKernel<Op, uint32_t><<<BlocksFor(pass.numel), kThreads, 0, stream>>>(
        from, dst, static_cast<uint32_t>(pass.numel),
        internal::DimsAs<uint32_t>(pass.dims), op);
  } else {
    StridedKernel<Op, uint64_t><<<BlocksFor(pass.numel), kThreads, 0, stream>>>(
        from, dst, static_cast<uint64_t>(pass.numel),
        internal::DimsAs<uint64_t>(pass.dims), op);
  }
}

// The copy of CopyStridedCuda (and of ConvertCuda for equal dtypes), after
// the argument checks, for nonempty views.
absl::Status CopyViews(std::string_view function, const void* src_base,
                       const Layout& src, void* dst_base, const Layout& dst,
                       size_t elem_size, cudaStream_t stream) {
  const int64_t item = static_cast<int64_t>(elem_size);
  const char* from = static_cast<const char*>(src_base) + src.offset() * item;
  char* to = static_cast<char*>(dst_base) + dst.offset() * item;
  const Pass pass =
      internal::PlanCopy(src, dst, elem_size, Address(from), Address(to));
  const int64_t bytes = pass.numel * static_cast<int64_t>(pass.unit);
  if (pass.kind == PassKind::kContiguous) {
    return cuda::CudaStatus(
        cudaMemcpyAsync(to, from, static_cast<size_t>(bytes), cudaMemcpyDefault,
                        stream),
        absl::StrCat(ToAbsl(function), ": cudaMemcpyAsync of ", bytes,
                     " bytes"));
  }
  switch (pass.unit) {
    case 1:
      LaunchStrided(pass, from, to, CopyOp<uint8_t>{}, stream);
      break;
    case 2:
      LaunchStrided(pass, from, to, CopyOp<uint16_t>{}, stream);
      break;
    case 4:
      LaunchStrided(pass, from, to, CopyOp<uint32_t>{}, stream);
      break;
    case 8:
      LaunchStrided(pass, from, to, CopyOp<uint64_t>{}, stream);
      break;
    default:  // kVectorBytes, the only other word size PlanCopy picks.
      LaunchStrided(pass, from, to, CopyOp<uint4>{}, stream);
      break;
  }
  return LaunchStatus(function, [&] {
    return absl::StrCat("the copy kernel for ", pass.unit, "-byte words");
  });
}

// Launches ContiguousKernel for numel From elements at src to To elements at
// dst, unless no head aligns both for vectors (then returns false).
template <typename From, typename To>
bool LaunchVectorConvert(int64_t numel, const char* src, char* dst,
                         cudaStream_t stream) {
  using Op = ConvertOp<From, To>;
  using Src = typename Op::Src;
  using Dst = typename Op::Dst;
  constexpr int kVec =
      static_cast<int>(kVectorBytes / std::min(sizeof(Src), sizeof(Dst)));
  const std::optional<VectorSplit> split = internal::SplitForVectors(
      Address(src), sizeof(Src), Address(dst), sizeof(Dst), numel, kVec);
  if (!split.has_value()) return false;
  ContiguousKernel<Op, kVec>
      <<<BlocksFor(split->vectors), kThreads, 0, stream>>>(
          reinterpret_cast<const Src*>(src), reinterpret_cast<Dst*>(dst), numel,
          *split, Op{});
  return true;
}

// Launches the conversion of a planned pass from src (From elements) to dst
// (elements of `to`, a distinct dtype), both aligned to their element sizes.
template <typename From>
void LaunchConvert(const Pass& pass, const char* src, DType to, char* dst,
                   cudaStream_t stream) {
  bool launched = false;
  if (pass.kind == PassKind::kContiguous) {
    CallForDType(to, [&]<typename To>(TypeTag<To>) {
      if constexpr (!std::is_same_v<From, To>) {
        launched = LaunchVectorConvert<From, To>(pass.numel, src, dst, stream);
      }
    });
  }
  if (!launched) LaunchStrided(pass, src, dst, ConvertFromOp<From>{to}, stream);
}

}  // namespace

absl::Status FillCuda(void* dst, int64_t numel, const void* pattern,
                      size_t elem_size, CUstream_st* stream) {
  GENESIS_RETURN_IF_ERROR(
      fill_internal::CheckFill(dst, numel, pattern, elem_size, "FillCuda"));
  if (numel == 0) return absl::OkStatus();
  const FillPlan plan =
      internal::PlanFill(Address(dst), numel, pattern, elem_size);
  FillKernel<<<BlocksFor(plan.vectors), kThreads, 0, stream>>>(
      static_cast<uint8_t*>(dst), plan);
  return LaunchStatus("FillCuda", [] { return "the fill kernel"; });
}

absl::Status ArangeCuda(void* dst, int64_t numel, double start, double step,
                        DType dtype, CUstream_st* stream) {
  GENESIS_RETURN_IF_ERROR(
      fill_internal::CheckArange(dst, numel, dtype, "ArangeCuda"));
  if (numel == 0) return absl::OkStatus();
  GENESIS_RETURN_IF_ERROR(CheckAligned(dst, dtype, "ArangeCuda", "dst"));
  return VisitDType(dtype, "ArangeCuda", "dtype", [&]<typename T>(TypeTag<T>) {
    ArangeKernel<T><<<BlocksFor(numel), kThreads, 0, stream>>>(
        static_cast<StorageOf<T>*>(dst), numel, start, step);
    return LaunchStatus("ArangeCuda", [&] {
      return absl::StrCat("the ", ToAbsl(DTypeName(dtype)), " arange kernel");
    });
  });
}

absl::Status CopyStridedCuda(const void* src_base, const Layout& src,
                             void* dst_base, const Layout& dst,
                             size_t elem_size, CUstream_st* stream) {
  constexpr std::string_view kFunction = "CopyStridedCuda";
  GENESIS_RETURN_IF_ERROR(
      strided_internal::CheckSameShape(src, dst, kFunction));
  if (elem_size == 0) {
    return absl::InvalidArgumentError("CopyStridedCuda: elem_size = 0");
  }
  GENESIS_RETURN_IF_ERROR(strided_internal::CheckWritable(dst, kFunction));
  GENESIS_RETURN_IF_ERROR(
      CheckBases(src_base, dst_base, src.numel(), kFunction));
  if (src.numel() == 0) return absl::OkStatus();
  return CopyViews(kFunction, src_base, src, dst_base, dst, elem_size, stream);
}

absl::Status ConvertCuda(const void* src_base, const Layout& src,
                         DType src_type, void* dst_base, const Layout& dst,
                         DType dst_type, CUstream_st* stream) {
  constexpr std::string_view kFunction = "ConvertCuda";
  GENESIS_RETURN_IF_ERROR(CheckDType(src_type, kFunction, "src_type"));
  GENESIS_RETURN_IF_ERROR(CheckDType(dst_type, kFunction, "dst_type"));
  GENESIS_RETURN_IF_ERROR(
      strided_internal::CheckSameShape(src, dst, kFunction));
  GENESIS_RETURN_IF_ERROR(strided_internal::CheckWritable(dst, kFunction));
  GENESIS_RETURN_IF_ERROR(
      CheckBases(src_base, dst_base, src.numel(), kFunction));
  if (src.numel() == 0) return absl::OkStatus();
  if (src_type == dst_type) {
    return CopyViews(kFunction, src_base, src, dst_base, dst,
                     ItemSize(src_type), stream);
  }
  GENESIS_RETURN_IF_ERROR(
      CheckAligned(src_base, src_type, kFunction, "src_base"));
  GENESIS_RETURN_IF_ERROR(
      CheckAligned(dst_base, dst_type, kFunction, "dst_base"));
  const int64_t src_item = static_cast<int64_t>(ItemSize(src_type));
  const int64_t dst_item = static_cast<int64_t>(ItemSize(dst_type));
  const char* from =
      static_cast<const char*>(src_base) + src.offset() * src_item;
  char* to = static_cast<char*>(dst_base) + dst.offset() * dst_item;
  const Pass pass = internal::PlanConvert(src, dst, ItemSize(src_type));
  GENESIS_RETURN_IF_ERROR(VisitDType(
      src_type, kFunction, "src_type", [&]<typename From>(TypeTag<From>) {
        LaunchConvert<From>(pass, from, dst_type, to, stream);
        return absl::OkStatus();
      }));
  return LaunchStatus(kFunction, [&] {
    return absl::StrCat("the ", ToAbsl(DTypeName(src_type)), " -> ",
                        ToAbsl(DTypeName(dst_type)), " conversion kernel");
  });
}

}  // namespace genesis::storage::kernels
