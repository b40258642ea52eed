#include "genesis/distributed/nccl/one_shot_kernel.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include <nccl_device.h>

#include <cstddef>
#include <cstdint>
#include <cuda/atomic>
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
  size_t bytes;
  size_t slot_bytes;  // The layout's max_bytes: slot 1 starts there.
  size_t inbox;       // The layout's inbox(0, 0).
  size_t epochs;      // The layout's epoch(0).
  int rank;
  int ranks;
  bool aligned;  // `in` and `out` both on 16 bytes.
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

// One block: its chunk of the message into its slot, a barrier with the same block of
// every peer, then every rank's slot reduced in rank order into the output.
template <typename T, ReduceOp kOp>
__global__ void __launch_bounds__(kOneShotThreads) OneShotAllReduce(Params p) {
  using A = typename Accumulate<T>::type;
  constexpr int kElements = 16 / sizeof(T);
  __shared__ uint32_t epoch_of_block;
  __shared__ int stop;
  const int t = static_cast<int>(threadIdx.x);
  const size_t block = blockIdx.x;
  uint32_t* const epoch_word = reinterpret_cast<uint32_t*>(p.local + p.epochs) + block;
  if (t == 0) {
    epoch_of_block = *epoch_word;
    stop = 0;
  }
  __syncthreads();
  const uint32_t epoch = epoch_of_block;
  const size_t at = block * kOneShotChunkBytes + static_cast<size_t>(t) * 16;
  const int valid = at < p.bytes ? static_cast<int>(p.bytes - at < 16 ? p.bytes - at : 16) : 0;
  const size_t slot = (epoch & 1) * p.slot_bytes + at;
  Pack mine;
  if (valid > 0) {
    LoadPart<T>(mine, p.in + at, valid, p.aligned);
    *reinterpret_cast<uint4*>(p.local + slot) = mine.vector;
  }
  __syncthreads();
  if (t < p.ranks - 1) {
    // Thread t tells peer t (skipping this rank) that this block's chunk is in its
    // slot (the release orders the block's stores before it), then waits for the peer
    // to say the same.
    const int peer = t + (t >= p.rank ? 1 : 0);
    auto* theirs = static_cast<uint32_t*>(
        ncclGetLsaPointer(p.window, p.inbox + (block * p.ranks + p.rank) * 4, peer));
    cuda::atomic_ref<uint32_t, cuda::thread_scope_system>(*theirs).store(
        epoch + 1, cuda::memory_order_release);
    cuda::atomic_ref<uint32_t, cuda::thread_scope_system> box(
        *reinterpret_cast<uint32_t*>(p.local + p.inbox + (block * p.ranks + peer) * 4));
    for (uint32_t spins = 1;; ++spins) {
      if (static_cast<int32_t>(box.load(cuda::memory_order_acquire) - (epoch + 1)) >= 0) break;
      if (spins % 256 == 0 && *p.abort != 0) {
        stop = 1;
        break;
      }
    }
  }
  __syncthreads();
  if (stop != 0) return;
  if (valid > 0) {
    Pack in[kOneShotMaxRanks];
#pragma unroll
    for (int r = 0; r < kOneShotMaxRanks; ++r) {
      if (r < p.ranks) {
        // Cached in L2 only: L1 could still hold this slot from two operations ago.
        in[r].vector =
            r == p.rank ? mine.vector
                        : __ldcg(static_cast<const uint4*>(ncclGetLsaPointer(p.window, slot, r)));
      }
    }
    A acc[kElements];
#pragma unroll
    for (int i = 0; i < kElements; ++i) acc[i] = Widen(Element<T>(in[0], i));
#pragma unroll
    for (int r = 1; r < kOneShotMaxRanks; ++r) {
      if (r < p.ranks) {
#pragma unroll
        for (int i = 0; i < kElements; ++i) {
          acc[i] = Combine<kOp>(acc[i], Widen(Element<T>(in[r], i)));
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
    StorePart<T>(p.out + at, out, valid, p.aligned);
  }
  if (t == 0) *epoch_word = epoch + 1;
}

template <typename T, ReduceOp kOp>
void Launch(const Params& p, unsigned blocks, cudaStream_t stream) {
  OneShotAllReduce<T, kOp><<<blocks, kOneShotThreads, 0, stream>>>(p);
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

absl::Status LaunchOneShotAllReduce(const OneShotArgs& args, CUstream_st* stream) {
  const OneShotLayout& layout = *args.layout;
  if (args.bytes == 0 || args.bytes > layout.max_bytes()) {
    return absl::InvalidArgumentError(absl::StrCat("one-shot all_reduce of ", args.bytes,
                                                   " bytes (1 to ", layout.max_bytes(), ")"));
  }
  Params p;
  p.window = static_cast<ncclWindow_t>(args.window);
  p.local = args.local;
  p.abort = args.abort;
  p.in = static_cast<const char*>(args.in);
  p.out = static_cast<char*>(args.out);
  p.bytes = args.bytes;
  p.slot_bytes = layout.slot(1);
  p.inbox = layout.inbox(0, 0);
  p.epochs = layout.epoch(0);
  p.rank = args.rank;
  p.ranks = layout.ranks();
  p.aligned =
      (reinterpret_cast<uintptr_t>(args.in) | reinterpret_cast<uintptr_t>(args.out)) % 16 == 0;
  const auto blocks = static_cast<unsigned>(OneShotLayout::Blocks(args.bytes));
  if (!OneShotReduces(args.dtype, args.op) || !LaunchFor(args.dtype, args.op, p, blocks, stream)) {
    return absl::InvalidArgumentError(absl::StrCat("the one-shot all_reduce does not reduce ",
                                                   ToAbsl(DTypeName(args.dtype)), " with ",
                                                   ToAbsl(ReduceOpName(args.op))));
  }
  const cudaError_t launched = cudaGetLastError();
  if (launched != cudaSuccess) {
    return absl::InternalError(
        absl::StrCat("launching the one-shot all_reduce: ", cudaGetErrorName(launched), ": ",
                     cudaGetErrorString(launched)));
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
