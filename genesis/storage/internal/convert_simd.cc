// Compiled once per instruction set by Highway's foreach_target.h, which includes this
// file again for each; the per-target kernels live in HWY_NAMESPACE, the dispatching
// functions (HWY_ONCE) after them.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "genesis/storage/internal/convert_simd.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "genesis/core/half.h"
#include "genesis/storage/internal/convert_simd.h"
#include "hwy/cache_control.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace genesis::storage::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Full vectors of 32-bit lanes; the 16-bit side is a half vector of the same lanes.
using DU32 = hn::ScalableTag<uint32_t>;
using DI32 = hn::Rebind<int32_t, DU32>;
using DF32 = hn::Rebind<float, DU32>;
using DU16 = hn::Rebind<uint16_t, DU32>;

// The tails, element by element; buffers may be unaligned for their element type.
template <typename T>
HWY_INLINE T Read(const T* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}
template <typename T>
HWY_INLINE void Write(T* p, T value) {
  std::memcpy(p, &value, sizeof(T));
}

template <class V>
HWY_INLINE hn::Vec<DU16> Narrow(V bits) {  // Values are below 2^16.
  return hn::DemoteTo(DU16(), hn::BitCast(DI32(), bits));
}

// The masks of comparisons of values below 2^31, as signed integers.
template <class V>
HWY_INLINE auto Above(V v, uint32_t limit) {
  return hn::RebindMask(DU32(), hn::Gt(hn::BitCast(DI32(), v), hn::Set(DI32(), static_cast<int32_t>(limit))));
}

// The 16-bit encodings of the floats in `x` (as bits), one per 32-bit lane.
template <class V>
HWY_INLINE V BFloat16Bits(V x) {
  const DU32 du32;
  const auto is_nan = Above(hn::And(x, hn::Set(du32, 0x7FFFFFFFu)), 0x7F800000u);
  const auto lsb = hn::And(hn::ShiftRight<16>(x), hn::Set(du32, 1u));
  const auto rounded = hn::ShiftRight<16>(hn::Add(hn::Add(x, hn::Set(du32, 0x7FFFu)), lsb));
  const auto nan = hn::Or(hn::ShiftRight<16>(x), hn::Set(du32, 0x0040u));
  return hn::IfThenElse(is_nan, nan, rounded);
}

template <class V>
HWY_INLINE V HalfBits(V x) {
  const DU32 du32;
  const auto k1 = hn::Set(du32, 1u);
  const auto sign = hn::And(hn::ShiftRight<16>(x), hn::Set(du32, 0x8000u));
  const auto abs = hn::And(x, hn::Set(du32, 0x7FFFFFFFu));
  // The cases of FloatToHalfBits, from the last to the first, each overriding.
  // Subnormal: value / 2^-24 rounded; the shift is clamped to [1, 31] so that lanes
  // of the other cases compute something harmless.
  const auto mantissa = hn::Or(hn::And(abs, hn::Set(du32, 0x7FFFFFu)), hn::Set(du32, 0x800000u));
  const auto shift = hn::Min(hn::Max(hn::Sub(hn::Set(du32, 126u), hn::ShiftRight<23>(abs)), k1),
                             hn::Set(du32, 31u));
  const auto round = hn::Add(hn::Sub(k1 << hn::Sub(shift, k1), k1),
                             hn::And(mantissa >> shift, k1));
  auto r = hn::Add(mantissa, round) >> shift;
  r = hn::IfThenZeroElse(hn::Not(Above(abs, 0x33000000u)), r);  // <= 2^-25: zero.
  const auto rebiased = hn::Sub(abs, hn::Set(du32, 0x38000000u));
  const auto normal = hn::ShiftRight<13>(
      hn::Add(hn::Add(rebiased, hn::Set(du32, 0xFFFu)), hn::And(hn::ShiftRight<13>(rebiased), k1)));
  r = hn::IfThenElse(Above(abs, 0x387FFFFFu), normal, r);  // >= 2^-14: normal.
  r = hn::IfThenElse(Above(abs, 0x477FEFFFu), hn::Set(du32, 0x7C00u), r);  // >= 65520.
  const auto nan = hn::Or(hn::Set(du32, 0x7E00u), hn::And(hn::ShiftRight<13>(abs), hn::Set(du32, 0x3FFu)));
  r = hn::IfThenElse(Above(abs, 0x7F800000u), nan, r);
  return hn::Or(sign, r);
}

// The float bits of the 16-bit encodings in `bits`, one per 32-bit lane.
template <class V>
HWY_INLINE V BFloat16Widened(V bits) {
  const DU32 du32;
  const auto quiet = hn::IfThenElseZero(Above(hn::And(bits, hn::Set(du32, 0x7FFFu)), 0x7F80u),
                                        hn::Set(du32, 0x0040u));
  return hn::ShiftLeft<16>(hn::Or(bits, quiet));
}

template <class V>
HWY_INLINE V HalfWidened(V b) {
  const DU32 du32;
  const DF32 df32;
  const auto sign = hn::ShiftLeft<16>(hn::And(b, hn::Set(du32, 0x8000u)));
  const auto exponent = hn::And(hn::ShiftRight<10>(b), hn::Set(du32, 0x1Fu));
  const auto mantissa = hn::And(b, hn::Set(du32, 0x3FFu));
  // Subnormal (and zero): mantissa * 2^-24, exact in float.
  auto r = hn::BitCast(du32, hn::Mul(hn::ConvertTo(df32, hn::BitCast(DI32(), mantissa)),
                                     hn::Set(df32, 1.0f / 16777216.0f)));
  const auto normal = hn::Or(hn::ShiftLeft<23>(hn::Add(exponent, hn::Set(du32, 112u))),
                             hn::ShiftLeft<13>(mantissa));
  r = hn::IfThenElse(hn::Ne(exponent, hn::Zero(du32)), normal, r);
  const auto quiet = hn::IfThenElseZero(hn::Ne(mantissa, hn::Zero(du32)), hn::Set(du32, 0x400000u));
  const auto special = hn::Or(hn::Or(hn::Set(du32, 0x7F800000u), hn::ShiftLeft<13>(mantissa)), quiet);
  r = hn::IfThenElse(hn::Eq(exponent, hn::Set(du32, 0x1Fu)), special, r);
  return hn::Or(sign, r);
}

// Whether a conversion writes `dst` (n items) with non-temporal stores: big enough
// (kStreamBytes), and aligned to its item so that it can be aligned to a vector.
template <typename T>
HWY_INLINE bool Streamed(const T* dst, size_t n) {
  return n * sizeof(T) >= kStreamBytes && reinterpret_cast<uintptr_t>(dst) % sizeof(T) == 0;
}

// How far ahead of the loads the source is prefetched: the hardware prefetcher alone
// leaves one core's loop waiting for lines (about 0.75 of memcpy's rate without).
constexpr size_t kPrefetchBytes = 2048;

HWY_INLINE void PrefetchAhead(const void* p) {
  const char* const ahead = static_cast<const char*>(p) + kPrefetchBytes;
  hwy::Prefetch(ahead);
  hwy::Prefetch(ahead + 64);
}

#if HWY_TARGET == HWY_SCALAR

void FloatToBFloat16Kernel(const float* HWY_RESTRICT src, uint16_t* HWY_RESTRICT dst,
                           size_t n) {
  for (size_t i = 0; i < n; ++i) Write(dst + i, FloatToBFloat16Bits(Read<float>(src + i)));
}
void FloatToHalfKernel(const float* HWY_RESTRICT src, uint16_t* HWY_RESTRICT dst, size_t n) {
  for (size_t i = 0; i < n; ++i) Write(dst + i, FloatToHalfBits(Read<float>(src + i)));
}
void BFloat16ToFloatKernel(const uint16_t* HWY_RESTRICT src, float* HWY_RESTRICT dst,
                           size_t n) {
  for (size_t i = 0; i < n; ++i) Write(dst + i, BFloat16BitsToFloat(Read<uint16_t>(src + i)));
}
void HalfToFloatKernel(const uint16_t* HWY_RESTRICT src, float* HWY_RESTRICT dst, size_t n) {
  for (size_t i = 0; i < n; ++i) Write(dst + i, HalfBitsToFloat(Read<uint16_t>(src + i)));
}

#else  // HWY_TARGET != HWY_SCALAR

// A full vector of 16-bit lanes and its halves (which Rebind DU32's lanes).
using DU16Full = hn::Repartition<uint16_t, DU32>;

// The 16-bit encodings of a vector of floats, and the floats of a half vector of
// encodings. Where the CPU has F16C (the AVX2 targets and up), float16 goes through its
// conversions, which round to nearest even and quiet NaNs exactly as the scalar ones do.
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
#define GENESIS_F16C 1
#else
#define GENESIS_F16C 0
#endif
using DF16 = hn::Rebind<hwy::float16_t, DF32>;

template <class VF>
HWY_INLINE hn::Vec<DU16> ToBFloat16(VF v) {
  return Narrow(BFloat16Bits(hn::BitCast(DU32(), v)));
}
template <class VF>
HWY_INLINE hn::Vec<DU16> ToHalf(VF v) {
#if GENESIS_F16C
  return hn::BitCast(DU16(), hn::DemoteTo(DF16(), v));
#else
  return Narrow(HalfBits(hn::BitCast(DU32(), v)));
#endif
}
template <class V16>
HWY_INLINE hn::Vec<DF32> FromBFloat16(V16 v) {
  return hn::BitCast(DF32(), BFloat16Widened(hn::PromoteTo(DU32(), v)));
}
template <class V16>
HWY_INLINE hn::Vec<DF32> FromHalf(V16 v) {
#if GENESIS_F16C
  return hn::PromoteTo(DF32(), hn::BitCast(DF16(), v));
#else
  return hn::BitCast(DF32(), HalfWidened(hn::PromoteTo(DU32(), v)));
#endif
}
#undef GENESIS_F16C

// Converts n floats to 16-bit encodings: `bits` per vector, `scalar` per item.
// Each step converts two vectors of floats into one full vector, so that with
// non-temporal stores (big, aligned conversions) whole vectors, and lines, are
// written; the items before the first aligned one go one by one.
template <class Bits, class Scalar>
HWY_INLINE void Narrowing(const float* HWY_RESTRICT src, uint16_t* HWY_RESTRICT dst, size_t n,
                          Bits bits, Scalar scalar) {
  const DU16Full du16;
  const size_t lanes = hn::Lanes(du16);
  const bool stream = Streamed(dst, n);
  size_t i = 0;
  if (stream) {
    const uintptr_t vector_bytes = lanes * sizeof(uint16_t);
    for (; i < n && reinterpret_cast<uintptr_t>(dst + i) % vector_bytes != 0; ++i) {
      Write(dst + i, scalar(Read<float>(src + i)));
    }
  }
  for (; i + lanes <= n; i += lanes) {
    PrefetchAhead(src + i);
    const auto lo = bits(hn::LoadU(DF32(), src + i));
    const auto hi = bits(hn::LoadU(DF32(), src + i + lanes / 2));
    const auto v = hn::Combine(du16, hi, lo);
    if (stream) {
      hn::Stream(v, du16, dst + i);
    } else {
      hn::StoreU(v, du16, dst + i);
    }
  }
  if (stream) hwy::FlushStream();
  for (; i < n; ++i) Write(dst + i, scalar(Read<float>(src + i)));
}

// Converts n 16-bit encodings to floats, one full vector of them into two vectors of
// floats per step; like Narrowing otherwise.
template <class Widened, class Scalar>
HWY_INLINE void Widening(const uint16_t* HWY_RESTRICT src, float* HWY_RESTRICT dst, size_t n,
                         Widened widened, Scalar scalar) {
  const DF32 df32;
  const DU16Full du16;
  const DU16 dh16;
  const size_t lanes = hn::Lanes(du16);
  const bool stream = Streamed(dst, n);
  size_t i = 0;
  if (stream) {
    const uintptr_t vector_bytes = lanes / 2 * sizeof(float);
    for (; i < n && reinterpret_cast<uintptr_t>(dst + i) % vector_bytes != 0; ++i) {
      Write(dst + i, scalar(Read<uint16_t>(src + i)));
    }
  }
  for (; i + lanes <= n; i += lanes) {
    PrefetchAhead(src + i);
    const auto v = hn::LoadU(du16, src + i);
    const auto lo = widened(hn::LowerHalf(dh16, v));
    const auto hi = widened(hn::UpperHalf(dh16, v));
    if (stream) {
      hn::Stream(lo, df32, dst + i);
      hn::Stream(hi, df32, dst + i + lanes / 2);
    } else {
      hn::StoreU(lo, df32, dst + i);
      hn::StoreU(hi, df32, dst + i + lanes / 2);
    }
  }
  if (stream) hwy::FlushStream();
  for (; i < n; ++i) Write(dst + i, scalar(Read<uint16_t>(src + i)));
}

void FloatToBFloat16Kernel(const float* HWY_RESTRICT src, uint16_t* HWY_RESTRICT dst,
                           size_t n) {
  Narrowing(src, dst, n, [](auto v) { return ToBFloat16(v); }, FloatToBFloat16Bits);
}

void FloatToHalfKernel(const float* HWY_RESTRICT src, uint16_t* HWY_RESTRICT dst, size_t n) {
  Narrowing(src, dst, n, [](auto v) { return ToHalf(v); }, FloatToHalfBits);
}

void BFloat16ToFloatKernel(const uint16_t* HWY_RESTRICT src, float* HWY_RESTRICT dst,
                           size_t n) {
  Widening(src, dst, n, [](auto v) { return FromBFloat16(v); }, BFloat16BitsToFloat);
}

void HalfToFloatKernel(const uint16_t* HWY_RESTRICT src, float* HWY_RESTRICT dst, size_t n) {
  Widening(src, dst, n, [](auto v) { return FromHalf(v); }, HalfBitsToFloat);
}

#endif  // HWY_TARGET == HWY_SCALAR

}  // namespace HWY_NAMESPACE
}  // namespace genesis::storage::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <atomic>
#include <string>
#include <vector>

#include "genesis/storage/internal/bfloat16_native.h"
#include "genesis/storage/internal/convert_simd.h"
#include "hwy/targets.h"

namespace genesis::storage::simd {
namespace {

// ForceTarget's choice, for the native float32 -> bfloat16 kernel: chosen as the best
// (kAuto), forced (kNative), or left for a forced Highway target (kOther).
enum class Forced { kAuto, kNative, kOther };
std::atomic<Forced> forced{Forced::kAuto};

bool UseNativeBFloat16() {
  return forced.load(std::memory_order_relaxed) != Forced::kOther && HasNativeFloatToBFloat16();
}

}  // namespace

HWY_EXPORT(FloatToBFloat16Kernel);
HWY_EXPORT(BFloat16ToFloatKernel);
HWY_EXPORT(FloatToHalfKernel);
HWY_EXPORT(HalfToFloatKernel);

void FloatToBFloat16(const float* src, uint16_t* dst, size_t n) {
  if (UseNativeBFloat16()) {
    NativeFloatToBFloat16(src, dst, n, kStreamBytes);
    return;
  }
  HWY_DYNAMIC_DISPATCH(FloatToBFloat16Kernel)(src, dst, n);
}
void BFloat16ToFloat(const uint16_t* src, float* dst, size_t n) {
  HWY_DYNAMIC_DISPATCH(BFloat16ToFloatKernel)(src, dst, n);
}
void FloatToHalf(const float* src, uint16_t* dst, size_t n) {
  HWY_DYNAMIC_DISPATCH(FloatToHalfKernel)(src, dst, n);
}
void HalfToFloat(const uint16_t* src, float* dst, size_t n) {
  HWY_DYNAMIC_DISPATCH(HalfToFloatKernel)(src, dst, n);
}

std::vector<int64_t> AvailableTargets() {
  std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  if (HasNativeFloatToBFloat16()) targets.insert(targets.begin(), kNativeBFloat16Target);
  return targets;
}

std::string TargetName(int64_t target) {
  if (target == kNativeBFloat16Target) return "AVX512_BF16";
  return hwy::TargetName(target);
}

int64_t CurrentTarget() {
  if (UseNativeBFloat16()) return kNativeBFloat16Target;
  const std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  return targets.empty() ? 0 : targets.front();
}

void ForceTarget(int64_t target) {
  forced.store(target == 0                       ? Forced::kAuto
               : target == kNativeBFloat16Target ? Forced::kNative
                                                 : Forced::kOther,
               std::memory_order_relaxed);
  hwy::SetSupportedTargetsForTest(target == kNativeBFloat16Target ? 0 : target);
}

}  // namespace genesis::storage::simd
#endif  // HWY_ONCE
