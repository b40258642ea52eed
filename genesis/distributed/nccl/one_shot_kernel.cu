#include "genesis/distributed/nccl/one_shot_kernel.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include <nccl_device.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "genesis/core/absl_compat.h"

namespace genesis::distributed::nccl_backend {
namespace {

// What the kernel needs of OneShotArgs, by value.
struct Params {
  ncclWindow_t window;
  char* local;
  const volatile int* abort;
  const char* in;
  char* out;
  size_t piece;
  size_t slot_bytes;    // The layout's: slot 1 starts there.
  size_t region_bytes;  // The layout's: block b's region starts at b times it.
  size_t epochs;        // The layout's epoch(0).
  OneShotKind kind;
  int rank;
  int ranks;
  int root;
  bool aligned;  // Every address the kernel loads from or stores to is on 16 bytes.
};

// The type a reduction runs in: float for the 16-bit floating types (rounded once, at
// the end), the type itself otherwise.
template <typename T>
struct Accumulate {
  using type = T;
};
template <>
struct Accumulate<__half> {
  using type = float;
};
template <>
struct Accumulate<__nv_bfloat16> {
  using type = float;
};

template <typename T>
__device__ typename Accumulate<T>::type Widen(T x) {
  if constexpr (std::is_same_v<T, __half>) {
    return __half2float(x);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(x);
  } else {
    return x;
  }
}

template <typename T>
__device__ T Narrow(typename Accumulate<T>::type x) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(x);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(x);
  } else {
    return x;
  }
}

// Integers add and multiply modulo 2^bits, as NCCL does (in unsigned arithmetic: a
// signed overflow would be undefined).
template <ReduceOp kOp, typename A>
__device__ A Combine(A a, A b) {
  if constexpr (kOp == ReduceOp::kMin) {
    return b < a ? b : a;
  } else if constexpr (kOp == ReduceOp::kMax) {
    return a < b ? b : a;
  } else if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    const U x = static_cast<U>(a), y = static_cast<U>(b);
    return static_cast<A>(kOp == ReduceOp::kProd ? static_cast<U>(x * y) : static_cast<U>(x + y));
  } else if constexpr (kOp == ReduceOp::kProd) {
    return a * b;
  } else {
    return a + b;  // kSum, kAvg.
  }
}

// 16 bytes of a message, as a vector or as elements.
union alignas(16) Pack {
  uint4 vector;
  unsigned char bytes[16];
};

template <typename T>
__device__ void LoadPart(Pack& to, const char* from, int valid, bool aligned) {
  if (aligned && valid == 16) {
    to.vector = *reinterpret_cast<const uint4*>(from);
    return;
  }
  for (int i = 0; i < valid; i += static_cast<int>(sizeof(T))) {
    *reinterpret_cast<T*>(to.bytes + i) = *reinterpret_cast<const T*>(from + i);
  }
}

template <typename T>
__device__ void StorePart(char* to, const Pack& from, int valid, bool aligned) {
  if (aligned && valid == 16) {
    *reinterpret_cast<uint4*>(to) = from.vector;
    return;
  }
  for (int i = 0; i < valid; i += static_cast<int>(sizeof(T))) {
    *reinterpret_cast<T*>(to + i) = *reinterpret_cast<const T*>(from.bytes + i);
  }
}

template <typename T>
__device__ T Element(const Pack& p, int i) {
  return reinterpret_cast<const T*>(p.bytes)[i];
}

// Every rank's 16 bytes (`got`, in rank order) reduced in rank order.
template <typename T, ReduceOp kOp>
__device__ Pack ReduceRanks(const Params& p, const Pack* got) {
  using A = typename Accumulate<T>::type;
  constexpr int kElements = 16 / sizeof(T);
  A acc[kElements];
#pragma unroll
  for (int i = 0; i < kElements; ++i) acc[i] = Widen(Element<T>(got[0], i));
#pragma unroll
  for (int r = 1; r < kOneShotMaxRanks; ++r) {
    if (r < p.ranks) {
#pragma unroll
      for (int i = 0; i < kElements; ++i) {
        acc[i] = Combine<kOp>(acc[i], Widen(Element<T>(got[r], i)));
      }
    }
  }
  Pack out;
#pragma unroll
  for (int i = 0; i < kElements; ++i) {
    A v = acc[i];
    if constexpr (kOp == ReduceOp::kAvg) v = v / static_cast<A>(p.ranks);
    reinterpret_cast<T*>(out.bytes)[i] = Narrow<T>(v);
  }
  return out;
}

// Sends 16 bytes to `to` (a peer's window) as two lines of NCCL's LL format: each
// 8-byte half pairs 4 bytes of data with `flag`, and a 16-byte volatile store lands
// whole, so a reader that finds both flags has the data, with no fence between.
__device__ void SendLL(char* to, const Pack& v, uint32_t flag) {
  const auto* w = reinterpret_cast<const uint32_t*>(v.bytes);
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(to), "r"(w[0]), "r"(flag),
               "r"(w[1]), "r"(flag)
               : "memory");
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(to + 16), "r"(w[2]),
               "r"(flag), "r"(w[3]), "r"(flag)
               : "memory");
}

// Waits for the 16 bytes a peer sent with `flag` to `from` (this rank's window). False
// when the group failed meanwhile (the abort flag, read every 1024 polls).
__device__ bool ReceiveLL(const char* from, Pack& v, uint32_t flag, const volatile int* abort) {
  auto* w = reinterpret_cast<uint32_t*>(v.bytes);
  for (int half = 0; half < 2; ++half) {
    for (uint32_t polls = 1;; ++polls) {
      uint32_t d0, f0, d1, f1;
      asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(d0), "=r"(f0), "=r"(d1), "=r"(f1)
                   : "l"(from + 16 * half)
                   : "memory");
      if (f0 == flag && f1 == flag) {
        w[2 * half] = d0;
        w[2 * half + 1] = d1;
        break;
      }
      if (polls % 1024 == 0 && *abort != 0) return false;
    }
  }
  return true;
}

// One block: each thread sends its 16 bytes of the piece (reduce_scatter, all_to_all:
// of the peer's part) to every peer's window, receives every peer's, and writes what
// the operation makes of them.
template <typename T, ReduceOp kOp>
__global__ void __launch_bounds__(kOneShotThreads) OneShot(Params p) {
  __shared__ uint32_t epoch_of_block;
  const int t = static_cast<int>(threadIdx.x);
  const size_t block = blockIdx.x;
  uint32_t* const epoch_word = reinterpret_cast<uint32_t*>(p.local + p.epochs) + block;
  if (t == 0) epoch_of_block = *epoch_word;
  __syncthreads();
  const uint32_t epoch = epoch_of_block;
  // Never 0, the flags of lines never written (the epoch wraps after 2^32 operations).
  const uint32_t flag = epoch + 1 == 0 ? 1 : epoch + 1;
  const size_t at = block * kOneShotChunkBytes + static_cast<size_t>(t) * 16;
  const int valid = at < p.piece ? static_cast<int>(p.piece - at < 16 ? p.piece - at : 16) : 0;
  if (valid > 0) {
    // Rank q's lines from this thread's peer thread: at (q, t) of this block's region.
    const size_t region = (epoch & 1) * p.slot_bytes + block * p.region_bytes;
    const auto line = [&](int q) {
      return region + (static_cast<size_t>(q) * kOneShotThreads + t) * 32;
    };
    const bool scatter = OneShotScatters(p.kind);
    Pack mine = {};
    if (!scatter && (p.kind != OneShotKind::kBroadcast || p.rank == p.root)) {
      LoadPart<T>(mine, p.in + at, valid, p.aligned);
    }
    // Every rank sends to every peer, also where the peer does not use it (broadcast's
    // non-roots, reduce's root): an operation then ends on a rank only once every peer
    // started it, that is finished the one before, which keeps the two slots apart.
    for (int q = 0; q < p.ranks; ++q) {
      if (q == p.rank) continue;
      Pack part = mine;
      if (scatter) LoadPart<T>(part, p.in + q * p.piece + at, valid, p.aligned);
      SendLL(static_cast<char*>(ncclGetLsaPointer(p.window, line(p.rank), q)), part, flag);
    }
    if (scatter) LoadPart<T>(mine, p.in + p.rank * p.piece + at, valid, p.aligned);
    Pack got[kOneShotMaxRanks];
#pragma unroll
    for (int q = 0; q < kOneShotMaxRanks; ++q) {
      if (q < p.ranks) {
        if (q == p.rank) {
          got[q] = mine;
        } else if (!ReceiveLL(p.local + line(q), got[q], flag, p.abort)) {
          return;
        }
      }
    }
    switch (p.kind) {
      case OneShotKind::kAllReduce:
      case OneShotKind::kReduceScatter:
        StorePart<T>(p.out + at, ReduceRanks<T, kOp>(p, got), valid, p.aligned);
        break;
      case OneShotKind::kReduce:
        if (p.rank == p.root) {
          StorePart<T>(p.out + at, ReduceRanks<T, kOp>(p, got), valid, p.aligned);
        }
        break;
      case OneShotKind::kBroadcast:
        if (p.rank != p.root) StorePart<T>(p.out + at, got[p.root], valid, p.aligned);
        break;
      case OneShotKind::kAllGather:
      case OneShotKind::kAllToAll:
        for (int q = 0; q < p.ranks; ++q) {
          StorePart<T>(p.out + q * p.piece + at, got[q], valid, p.aligned);
        }
        break;
    }
  }
  if (t == 0) *epoch_word = epoch + 1;
}

template <typename T, ReduceOp kOp>
void Launch(const Params& p, unsigned blocks, cudaStream_t stream) {
  OneShot<T, kOp><<<blocks, kOneShotThreads, 0, stream>>>(p);
}

template <typename T>
bool LaunchOp(ReduceOp op, const Params& p, unsigned blocks, cudaStream_t stream) {
  switch (op) {
    case ReduceOp::kSum:
      Launch<T, ReduceOp::kSum>(p, blocks, stream);
      return true;
    case ReduceOp::kProd:
      Launch<T, ReduceOp::kProd>(p, blocks, stream);
      return true;
    case ReduceOp::kMin:
      Launch<T, ReduceOp::kMin>(p, blocks, stream);
      return true;
    case ReduceOp::kMax:
      Launch<T, ReduceOp::kMax>(p, blocks, stream);
      return true;
    case ReduceOp::kAvg:
      if constexpr (std::is_integral_v<T>) {
        return false;
      } else {
        Launch<T, ReduceOp::kAvg>(p, blocks, stream);
        return true;
      }
  }
  return false;
}

bool LaunchFor(DType dtype, ReduceOp op, const Params& p, unsigned blocks, cudaStream_t stream) {
  switch (dtype) {
    case DType::kUInt8:
      return LaunchOp<uint8_t>(op, p, blocks, stream);
    case DType::kInt8:
      return LaunchOp<int8_t>(op, p, blocks, stream);
    case DType::kInt32:
      return LaunchOp<int32_t>(op, p, blocks, stream);
    case DType::kInt64:
      return LaunchOp<int64_t>(op, p, blocks, stream);
    case DType::kFloat16:
      return LaunchOp<__half>(op, p, blocks, stream);
    case DType::kBFloat16:
      return LaunchOp<__nv_bfloat16>(op, p, blocks, stream);
    case DType::kFloat32:
      return LaunchOp<float>(op, p, blocks, stream);
    case DType::kFloat64:
      return LaunchOp<double>(op, p, blocks, stream);
    default:
      return false;
  }
}

}  // namespace

absl::Status LaunchOneShot(const OneShotArgs& args, CUstream_st* stream) {
  const OneShotLayout& layout = *args.layout;
  const bool spread = OneShotScatters(args.kind) || OneShotGathers(args.kind);
  const size_t largest = spread ? args.piece * layout.ranks() : args.piece;
  if (args.piece == 0 || !layout.Serves(largest)) {
    return absl::InvalidArgumentError(absl::StrCat("one-shot ", ToAbsl(OneShotKindName(args.kind)),
                                                   " whose largest buffer has ", largest,
                                                   " bytes (1 to ", layout.max_bytes(), ")"));
  }
  if (args.root < 0 || args.root >= layout.ranks()) {
    return absl::InvalidArgumentError(absl::StrCat("one-shot ", ToAbsl(OneShotKindName(args.kind)),
                                                   " from root ", args.root, " of ", layout.ranks(),
                                                   " ranks"));
  }
  Params p;
  p.window = static_cast<ncclWindow_t>(args.window);
  p.local = args.local;
  p.abort = args.abort;
  p.in = static_cast<const char*>(args.in);
  p.out = static_cast<char*>(args.out);
  p.piece = args.piece;
  p.slot_bytes = layout.slot_bytes();
  p.region_bytes = layout.region_bytes();
  p.epochs = layout.epoch(0);
  p.kind = args.kind;
  p.rank = args.rank;
  p.ranks = layout.ranks();
  p.root = args.root;
  p.aligned = (reinterpret_cast<uintptr_t>(args.in) | reinterpret_cast<uintptr_t>(args.out) |
               (spread ? args.piece : 0)) %
                  16 ==
              0;
  const auto blocks = static_cast<unsigned>(OneShotLayout::Blocks(args.piece));
  // What only moves bytes runs the byte kernel (any alignment).
  const bool launched =
      OneShotReduces(args.kind)
          ? OneShotReduces(args.dtype, args.op) && LaunchFor(args.dtype, args.op, p, blocks, stream)
          : LaunchOp<uint8_t>(ReduceOp::kSum, p, blocks, stream);
  if (!launched) {
    return absl::InvalidArgumentError(
        absl::StrCat("the one-shot ", ToAbsl(OneShotKindName(args.kind)), " does not reduce ",
                     ToAbsl(DTypeName(args.dtype)), " with ", ToAbsl(ReduceOpName(args.op))));
  }
  const cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) {
    return absl::InternalError(
        absl::StrCat("launching the one-shot ", ToAbsl(OneShotKindName(args.kind)), ": ",
                     cudaGetErrorName(error), ": ", cudaGetErrorString(error)));
  }
  return absl::OkStatus();
}

absl::StatusOr<WindowRanks> ReadWindowRanks(void* window) {
  cudaPointerAttributes attributes;
  if (window == nullptr || cudaPointerGetAttributes(&attributes, window) != cudaSuccess ||
      attributes.type != cudaMemoryTypeDevice) {
    (void)cudaGetLastError();
    return absl::FailedPreconditionError("NCCL's window is not in device memory");
  }
  // Only the fields every NCCL 2.28 has in common (later releases append theirs).
  constexpr size_t kCommon = offsetof(ncclWindow_vidmem, mcOffset4K) + sizeof(uint32_t);
  ncclWindow_vidmem copy;
  const cudaError_t copied = cudaMemcpy(&copy, window, kCommon, cudaMemcpyDeviceToHost);
  if (copied != cudaSuccess) {
    return absl::InternalError(absl::StrCat("reading NCCL's window: ", cudaGetErrorName(copied)));
  }
  return WindowRanks{copy.lsaRank, copy.worldRank};
}

}  // namespace genesis::distributed::nccl_backend
