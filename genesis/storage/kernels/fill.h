// Filling CPU buffers with one repeated element (full, zeros, ones) or with an
// arithmetic sequence (arange), in any dtype. The CUDA kernels of
// cuda_kernels.h (FillCuda, ArangeCuda) write the same bytes on a GPU.
//
//   GENESIS_ASSIGN_OR_RETURN(ElementBytes one,
//                            ScalarPattern(1.0, DType::kBFloat16));
//   GENESIS_RETURN_IF_ERROR(FillHost(dst, n, one.data(), 2));   // ones(n)
//   GENESIS_RETURN_IF_ERROR(ArangeHost(dst, n, /*start=*/-1.0, /*step=*/0.25,
//                                      DType::kFloat16));
//
// The arange rule. Element i (0 <= i < numel) of dtype T is
//   ConvertValue<T>(ArangeValue(start, step, i)),
// where ArangeValue is fma(double(i), step, start): start + i * step computed
// in double and rounded once (a fused multiply-add), and a NaN result is the
// quiet NaN 0x7FF8000000000000 whatever the payloads of the inputs. The
// double then becomes a T by the rules of convert_rules.h: integers truncate
// toward zero and saturate (NaN gives 0), float16 / bfloat16 round once from
// the double, bool is true for nonzero. i converts to double exactly up to
// 2^53. The single rounding and the fixed NaN make the bits the same on every
// CPU and GPU: with a separate multiply and add, whether a compiler fuses the
// two (GPU compilers do by default) would decide the last bit.
//
// Buffers need no particular alignment (elements are stored with memcpy);
// bool elements are stored as one byte, 0 or 1. Single-threaded.
#ifndef GENESIS_STORAGE_KERNELS_FILL_H_
#define GENESIS_STORAGE_KERNELS_FILL_H_

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "genesis/core/dtype.h"
#include "genesis/storage/convert_rules.h"

namespace genesis::storage::kernels {

// One element's bytes: the first ItemSize(dtype) entries hold the element as
// it is stored in memory; the rest are 0.
using ElementBytes = std::array<uint8_t, 8>;

// The bytes of ConvertValue<T>(value) for the C++ type T of `dtype`, so that
// full(value) is FillHost / FillCuda with this pattern and ItemSize(dtype).
// (A double holds every integer up to 2^53 exactly; larger int64 values
// round.) InvalidArgument if dtype is not a DType.
absl::StatusOr<ElementBytes> ScalarPattern(double value, DType dtype);

// Writes the elem_size bytes at `pattern` numel times, contiguously, from
// `dst` on. elem_size is 1, 2, 4 or 8. InvalidArgument, with nothing written,
// for a negative numel, another elem_size, a byte count that overflows
// int64_t, or a null dst or pattern while numel > 0. numel 0 writes nothing.
absl::Status FillHost(void* dst, int64_t numel, const void* pattern,
                      size_t elem_size);

// Writes numel elements of `dtype` by the arange rule (see the file comment)
// contiguously from `dst` on. InvalidArgument, with nothing written, if dtype
// is not a DType, numel is negative, the byte count overflows int64_t, or
// dst is null while numel > 0.
absl::Status ArangeHost(void* dst, int64_t numel, double start, double step,
                        DType dtype);

// start + i * step with one rounding, NaN made the default quiet NaN: the
// value of element i before its conversion to the dtype (file comment).
// Usable from CUDA device code.
GENESIS_HOST_DEVICE inline double ArangeValue(double start, double step,
                                              int64_t i) {
#if defined(__CUDA_ARCH__)
  const double value = __fma_rn(static_cast<double>(i), step, start);
#else
  const double value = std::fma(static_cast<double>(i), step, start);
#endif
  return value != value
             ? convert_rules::BitCast<double>(uint64_t{0x7FF8000000000000})
             : value;
}

// Argument checks shared with the CUDA kernels; not for direct use.
namespace fill_internal {

// The checks of FillHost, with `function` naming the caller in messages.
absl::Status CheckFill(const void* dst, int64_t numel, const void* pattern,
                       size_t elem_size, std::string_view function);

// The checks of ArangeHost, with `function` naming the caller in messages.
absl::Status CheckArange(const void* dst, int64_t numel, DType dtype,
                         std::string_view function);

}  // namespace fill_internal
}  // namespace genesis::storage::kernels

#endif  // GENESIS_STORAGE_KERNELS_FILL_H_
