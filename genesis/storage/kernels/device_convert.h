// ConvertValue (convert_rules.h) as the CUDA kernels apply it to stored
// elements, giving on a GPU the bits the CPU conversions (convert.h) give.
//
//   uint8_t b = ConvertStored<float, bool>(x);         // 0 or 1
//   float f = ConvertStored<bool, float>(uint8_t{7});  // 1.0f
//
// Two things differ from calling ConvertValue in device code:
//   * bool elements are handled as their byte (StorageOf<bool> is uint8_t):
//     any nonzero byte reads as true and true is written as 1, as on the CPU.
//   * NaN payloads. GPU float <-> double conversions return a canonical NaN,
//     where x86-64 and AArch64 (and so the CPU conversions) keep the sign and
//     the leading payload bits and set the quiet bit, as IEEE 754 recommends.
//     ConvertElement does that explicitly for float32 / float16 / bfloat16 ->
//     float64 and float64 -> float32; every other pair already converts with
//     integer operations or has no NaN.
// On the host both functions equal ConvertValue bit for bit (the tests check
// every dtype pair), so host code can use them as the reference.
//
// Like convert_rules.h, this assumes device code compiled without
// flush-to-zero (nvcc's default; not --use_fast_math).
#ifndef GENESIS_STORAGE_KERNELS_DEVICE_CONVERT_H_
#define GENESIS_STORAGE_KERNELS_DEVICE_CONVERT_H_

#include <cstdint>
#include <type_traits>

#include "genesis/core/half.h"
#include "genesis/storage/convert_rules.h"

namespace genesis::storage::kernels {

// The type an element of C++ type T is loaded and stored as: its byte for
// bool, T itself otherwise.
template <typename T>
using StorageOf = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;

// ConvertValue<To>(value), with NaN payloads kept across float <-> double on
// every device (see the file comment).
template <typename To, typename From>
GENESIS_HOST_DEVICE inline To ConvertElement(From value) {
  using convert_rules::BitCast;
  constexpr bool kToDoubleFromNarrower =
      std::is_same_v<To, double> &&
      (std::is_same_v<From, float> || convert_rules::kIsSixteenBitFloat<From>);
  if constexpr (kToDoubleFromNarrower) {
    const float wide = ConvertValue<float>(value);  // Exact.
    const uint32_t bits = BitCast<uint32_t>(wide);
    if ((bits & 0x7FFFFFFFu) > 0x7F800000u) {
      // NaN: the sign, the 23 payload bits at the top of the 52, quiet.
      return BitCast<double>((static_cast<uint64_t>(bits & 0x80000000u) << 32) |
                             uint64_t{0x7FF8000000000000} |
                             (static_cast<uint64_t>(bits & 0x007FFFFFu) << 29));
    }
    return static_cast<double>(wide);
  } else if constexpr (std::is_same_v<To, float> &&
                       std::is_same_v<From, double>) {
    const uint64_t bits = BitCast<uint64_t>(value);
    if ((bits & ~(uint64_t{1} << 63)) > uint64_t{0x7FF0000000000000}) {
      // NaN: the sign, the top 23 of the 52 payload bits, quiet.
      return BitCast<float>((static_cast<uint32_t>(bits >> 32) & 0x80000000u) |
                            0x7FC00000u |
                            (static_cast<uint32_t>(bits >> 29) & 0x007FFFFFu));
    }
    return static_cast<float>(value);
  } else {
    return ConvertValue<To>(value);
  }
}

// Converts one stored element of C++ type From to its stored form as To:
// what every conversion kernel does per element.
template <typename From, typename To>
GENESIS_HOST_DEVICE inline StorageOf<To> ConvertStored(StorageOf<From> stored) {
  From value;
  if constexpr (std::is_same_v<From, bool>) {
    value = stored != 0;
  } else {
    value = stored;
  }
  const To result = ConvertElement<To>(value);
  if constexpr (std::is_same_v<To, bool>) {
    return static_cast<uint8_t>(result ? 1 : 0);
  } else {
    return result;
  }
}

}  // namespace genesis::storage::kernels

#endif  // GENESIS_STORAGE_KERNELS_DEVICE_CONVERT_H_
