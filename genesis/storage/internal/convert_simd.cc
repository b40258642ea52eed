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

void FloatToBFloat16Kernel(const float* HWY_RESTRICT src, uint16_t* HWY_RESTRICT dst,
                           size_t n) {
  const DU32 du32;
  const size_t lanes = hn::Lanes(du32);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto x = hn::BitCast(du32, hn::LoadU(DF32(), src + i));
    const auto is_nan = Above(hn::And(x, hn::Set(du32, 0x7FFFFFFFu)), 0x7F800000u);
    const auto lsb = hn::And(hn::ShiftRight<16>(x), hn::Set(du32, 1u));
    const auto rounded = hn::ShiftRight<16>(hn::Add(hn::Add(x, hn::Set(du32, 0x7FFFu)), lsb));
    const auto nan = hn::Or(hn::ShiftRight<16>(x), hn::Set(du32, 0x0040u));
    hn::StoreU(Narrow(hn::IfThenElse(is_nan, nan, rounded)), DU16(), dst + i);
  }
  for (; i < n; ++i) Write(dst + i, FloatToBFloat16Bits(Read<float>(src + i)));
}

void BFloat16ToFloatKernel(const uint16_t* HWY_RESTRICT src, float* HWY_RESTRICT dst,
                           size_t n) {
  const DU32 du32;
  const size_t lanes = hn::Lanes(du32);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto bits = hn::PromoteTo(du32, hn::LoadU(DU16(), src + i));
    const auto quiet = hn::IfThenElseZero(Above(hn::And(bits, hn::Set(du32, 0x7FFFu)), 0x7F80u),
                                          hn::Set(du32, 0x0040u));
    hn::StoreU(hn::BitCast(DF32(), hn::ShiftLeft<16>(hn::Or(bits, quiet))), DF32(), dst + i);
  }
  for (; i < n; ++i) Write(dst + i, BFloat16BitsToFloat(Read<uint16_t>(src + i)));
}

void FloatToHalfKernel(const float* HWY_RESTRICT src, uint16_t* HWY_RESTRICT dst, size_t n) {
  const DU32 du32;
  const size_t lanes = hn::Lanes(du32);
  const auto k1 = hn::Set(du32, 1u);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto x = hn::BitCast(du32, hn::LoadU(DF32(), src + i));
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
    hn::StoreU(Narrow(hn::Or(sign, r)), DU16(), dst + i);
  }
  for (; i < n; ++i) Write(dst + i, FloatToHalfBits(Read<float>(src + i)));
}

void HalfToFloatKernel(const uint16_t* HWY_RESTRICT src, float* HWY_RESTRICT dst, size_t n) {
  const DU32 du32;
  const DF32 df32;
  const size_t lanes = hn::Lanes(du32);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto b = hn::PromoteTo(du32, hn::LoadU(DU16(), src + i));
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
    hn::StoreU(hn::BitCast(df32, hn::Or(sign, r)), df32, dst + i);
  }
  for (; i < n; ++i) Write(dst + i, HalfBitsToFloat(Read<uint16_t>(src + i)));
}

}  // namespace HWY_NAMESPACE
}  // namespace genesis::storage::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <string>
#include <vector>

#include "genesis/storage/internal/convert_simd.h"
#include "hwy/targets.h"

namespace genesis::storage::simd {

HWY_EXPORT(FloatToBFloat16Kernel);
HWY_EXPORT(BFloat16ToFloatKernel);
HWY_EXPORT(FloatToHalfKernel);
HWY_EXPORT(HalfToFloatKernel);

void FloatToBFloat16(const float* src, uint16_t* dst, size_t n) {
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

std::vector<int64_t> AvailableTargets() { return hwy::SupportedAndGeneratedTargets(); }

std::string TargetName(int64_t target) { return hwy::TargetName(target); }

int64_t CurrentTarget() {
  const std::vector<int64_t> targets = AvailableTargets();
  return targets.empty() ? 0 : targets.front();
}

void ForceTarget(int64_t target) { hwy::SetSupportedTargetsForTest(target); }

}  // namespace genesis::storage::simd
#endif  // HWY_ONCE
