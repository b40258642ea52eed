// Arithmetic the collectives' kernels share (nvcc only): the type a reduction runs in,
// and conversions to and from it.
#ifndef GENESIS_DISTRIBUTED_NCCL_DEVICE_ARITHMETIC_CUH_
#define GENESIS_DISTRIBUTED_NCCL_DEVICE_ARITHMETIC_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

namespace genesis::distributed::nccl_backend {

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

// `x` in the type its reduction runs in.
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

// A reduction's result `x` as T, rounded to nearest.
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

}  // namespace genesis::distributed::nccl_backend

#endif  // GENESIS_DISTRIBUTED_NCCL_DEVICE_ARITHMETIC_CUH_
