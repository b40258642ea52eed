// float32 -> bfloat16 with the CPU's own conversion (AVX512_BF16's vcvtne2ps2bf16), where
// it has one: 32 values per instruction, against about ten integer operations per vector
// for the rounding done by hand. Debian's Highway (1.0.3) has no target with these
// instructions, so this one kernel is written with intrinsics and chosen at run time.
//
// The results are bit-identical to FloatToBFloat16Bits (genesis/core/half.h): the
// instruction rounds to nearest even and quiets NaNs keeping their payload's top bits as
// it does, but reads subnormal inputs as zero, so the few vectors that hold one are
// converted by the scalar function instead.
#ifndef GENESIS_STORAGE_INTERNAL_BFLOAT16_NATIVE_H_
#define GENESIS_STORAGE_INTERNAL_BFLOAT16_NATIVE_H_

#include <cstddef>
#include <cstdint>

namespace genesis::storage::simd {

// Whether this build has the kernel and this CPU runs it (AVX512F, AVX512BW and
// AVX512_BF16).
bool HasNativeFloatToBFloat16();

// Converts n floats to bfloat16 encodings; only where HasNativeFloatToBFloat16().
// Buffers need no alignment and must not overlap. Outputs of `stream_bytes` or more are
// written with non-temporal stores, fenced before it returns.
void NativeFloatToBFloat16(const float* src, uint16_t* dst, size_t n, size_t stream_bytes);

}  // namespace genesis::storage::simd

#endif  // GENESIS_STORAGE_INTERNAL_BFLOAT16_NATIVE_H_
