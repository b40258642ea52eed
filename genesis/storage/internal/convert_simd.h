// Vectorised float32 <-> bfloat16 and float32 <-> float16 conversion of contiguous
// buffers, dispatched at run time (Google Highway) to the best instruction set the CPU
// has: AVX-512, AVX2 (with F16C, FMA), SSE4 or SSSE3, else scalar; float32 -> bfloat16
// with AVX512_BF16's own conversion where the CPU has it. The results are
// bit-identical to the scalar conversions of genesis/core/half.h (round to nearest even;
// NaN payloads kept with the quiet bit set; overflow to infinity; subnormals exact).
//
// Buffers need no alignment (pointers may be misaligned for their element type) and
// must not overlap. Single-threaded. Conversions whose output is kStreamBytes or more
// write it with non-temporal stores (and fence them before returning): it does not pass
// through the caches, which neither read the destination first nor lose the source.
#ifndef GENESIS_STORAGE_INTERNAL_CONVERT_SIMD_H_
#define GENESIS_STORAGE_INTERNAL_CONVERT_SIMD_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace genesis::storage::simd {

inline constexpr size_t kStreamBytes = size_t{8} << 20;

void FloatToBFloat16(const float* src, uint16_t* dst, size_t n);
void BFloat16ToFloat(const uint16_t* src, float* dst, size_t n);
void FloatToHalf(const float* src, uint16_t* dst, size_t n);
void HalfToFloat(const uint16_t* src, float* dst, size_t n);

// float32 -> bfloat16 with the CPU's own instruction (bfloat16_native.h), ahead of
// Highway's targets where the CPU has AVX512_BF16; the other conversions then use the
// best Highway target.
inline constexpr int64_t kNativeBFloat16Target = std::numeric_limits<int64_t>::min();

// For tests and reports: the instruction sets this binary has code for and this CPU
// runs (best first; kNativeBFloat16Target among them where the CPU has it), their names,
// and the one the functions above use now.
std::vector<int64_t> AvailableTargets();
std::string TargetName(int64_t target);
int64_t CurrentTarget();

// Makes the functions above use `target` (one of AvailableTargets()), or the best again
// for 0. Not thread-safe: for tests.
void ForceTarget(int64_t target);

}  // namespace genesis::storage::simd

#endif  // GENESIS_STORAGE_INTERNAL_CONVERT_SIMD_H_
