#include "genesis/storage/internal/bfloat16_native.h"

#include <algorithm>
#include <cstring>

#include "genesis/core/half.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 10
#define GENESIS_BF16_NATIVE 1
#include <immintrin.h>
#else
#define GENESIS_BF16_NATIVE 0
#endif

namespace genesis::storage::simd {
namespace {

void ScalarFloatToBFloat16(const float* src, uint16_t* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    float value;
    std::memcpy(&value, src + i, sizeof(value));
    const uint16_t bits = FloatToBFloat16Bits(value);
    std::memcpy(dst + i, &bits, sizeof(bits));
  }
}

#if GENESIS_BF16_NATIVE

// How far ahead of the loads the source is prefetched (as the Highway kernels do).
constexpr size_t kPrefetchBytes = 2048;

// 32 floats at `src` into 32 encodings: the instruction, unless a value is subnormal.
template <bool kStream>
__attribute__((target("avx512f,avx512bw,avx512bf16"), always_inline)) inline void Convert32(
    const float* src, uint16_t* dst) {
  const __m512i lo = _mm512_loadu_si512(src);
  const __m512i hi = _mm512_loadu_si512(src + 16);
  const __m512i exponent = _mm512_set1_epi32(0x7F800000);
  const __m512i mantissa = _mm512_set1_epi32(0x007FFFFF);
  // Subnormal: exponent bits all zero, mantissa not.
  const __mmask16 sub_lo =
      _mm512_mask_test_epi32_mask(_mm512_testn_epi32_mask(lo, exponent), lo, mantissa);
  const __mmask16 sub_hi =
      _mm512_mask_test_epi32_mask(_mm512_testn_epi32_mask(hi, exponent), hi, mantissa);
  __m512i v;
  if ((sub_lo | sub_hi) != 0) [[unlikely]] {
    alignas(64) uint16_t out[32];
    ScalarFloatToBFloat16(src, out, 32);
    v = _mm512_load_si512(out);
  } else {
    v = reinterpret_cast<__m512i>(
        _mm512_cvtne2ps_pbh(_mm512_castsi512_ps(hi), _mm512_castsi512_ps(lo)));
  }
  if constexpr (kStream) {
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst), v);
  } else {
    _mm512_storeu_si512(dst, v);
  }
}

// Converts from item `i` on, 32 at a time, then the tail one by one; kStream: `dst + i`
// is 64-byte aligned, and the stores are non-temporal (fenced here).
template <bool kStream>
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void ConvertFrom(
    size_t i, const float* src, uint16_t* dst, size_t n) {
  for (; i + 32 <= n; i += 32) {
    const char* const ahead = reinterpret_cast<const char*>(src + i) + kPrefetchBytes;
    _mm_prefetch(ahead, _MM_HINT_T0);
    // Cached outputs run faster with one line prefetched a step (72-73 against 78 us for
    // 2^20 values on the build VM); streamed ones read both.
    if constexpr (kStream) _mm_prefetch(ahead + 64, _MM_HINT_T0);
    Convert32<kStream>(src + i, dst + i);
  }
  if constexpr (kStream) _mm_sfence();
  ScalarFloatToBFloat16(src + i, dst + i, n - i);
}

void Kernel(const float* src, uint16_t* dst, size_t n, size_t stream_bytes) {
  // Streamed outputs start at a 64-byte boundary (aligned to their item first).
  if (n * sizeof(uint16_t) >= stream_bytes && reinterpret_cast<uintptr_t>(dst) % 2 == 0) {
    const size_t head =
        std::min(n, (64 - reinterpret_cast<uintptr_t>(dst) % 64) % 64 / sizeof(uint16_t));
    ScalarFloatToBFloat16(src, dst, head);
    ConvertFrom<true>(head, src, dst, n);
  } else {
    ConvertFrom<false>(0, src, dst, n);
  }
}

#endif  // GENESIS_BF16_NATIVE

}  // namespace

bool HasNativeFloatToBFloat16() {
#if GENESIS_BF16_NATIVE
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512bf16");
  }();
  return has;
#else
  return false;
#endif
}

void NativeFloatToBFloat16(const float* src, uint16_t* dst, size_t n, size_t stream_bytes) {
#if GENESIS_BF16_NATIVE
  Kernel(src, dst, n, stream_bytes);
#else
  (void)stream_bytes;
  ScalarFloatToBFloat16(src, dst, n);
#endif
}

}  // namespace genesis::storage::simd
