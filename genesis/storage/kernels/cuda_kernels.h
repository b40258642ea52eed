// The storage layer's CUDA kernels: fill, arange, strided copy and dtype
// conversion of device buffers. Each one's result is bit for bit what its CPU
// counterpart writes (FillHost / ArangeHost in fill.h, CopyStrided in
// strided_copy.h, ConvertStrided in convert.h), NaN payloads included.
//
//   GENESIS_RETURN_IF_ERROR(ConvertCuda(src, src_layout, DType::kFloat32,
//                                       dst, dst_layout, DType::kBFloat16,
//                                       stream.native()));
//   GENESIS_RETURN_IF_ERROR(stream.Synchronize());
//
// Common contract:
//   * Work is queued on `stream` (a cudaStream_t; nullptr is the legacy
//     default stream) on the calling thread's current device, which must be
//     the device of the buffers and of the stream. Nothing synchronises:
//     errors that happen while the kernel runs surface at the next
//     synchronisation, as with any CUDA launch.
//   * The return value checks the arguments (InvalidArgument, naming the bad
//     value, with nothing queued) and then the launch: the CUDA error of the
//     launch (cudaGetLastError) as a status naming the function.
//   * Buffers are device memory (or memory the device can address). Views
//     are Layouts (layout.h) of a base buffer that `*_base` points at (base
//     element 0, not the view's offset); they must fit their buffers and the
//     bytes read must not overlap the bytes written (unchecked).
//   * An empty view (numel 0) is a no-op; then pointers may be null.
//   * Strided views may have any strides, stride 0 (broadcast) included for
//     sources; a destination must not write one place twice (InvalidArgument
//     for a stride-0 dim of size > 1).
//
// Performance: contiguous conversions run at close to memory bandwidth
// (vectorised 16-byte loads and stores); a transposed source (a batch of 2-D
// transposes) goes through shared-memory tiles so that reads and writes are
// both coalesced; other views take one thread per element with 32-bit index
// arithmetic when they fit. Copies move whole words of up to 16 bytes and
// contiguous ones are a cudaMemcpyAsync.
//
// This header includes no CUDA header, so callers compile without nvcc. In
// the CPU-only build every function fails with FailedPrecondition
// ("... genesis was built without CUDA").
#ifndef GENESIS_STORAGE_KERNELS_CUDA_KERNELS_H_
#define GENESIS_STORAGE_KERNELS_CUDA_KERNELS_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "genesis/core/dtype.h"
#include "genesis/storage/layout.h"

// The CUDA headers' own declaration: cudaStream_t is CUstream_st*.
struct CUstream_st;

namespace genesis::storage::kernels {

// Writes the elem_size (1, 2, 4 or 8) bytes at `pattern` (host memory, read
// before returning) numel times, contiguously, from `dst` on: FillHost on
// the device. `dst` needs no alignment. full(value) is this with
// ScalarPattern(value, dtype) (fill.h). InvalidArgument as FillHost.
absl::Status FillCuda(void* dst, int64_t numel, const void* pattern,
                      size_t elem_size, CUstream_st* stream);

// Writes numel elements of `dtype` by the arange rule of fill.h
// (ConvertValue<T>(ArangeValue(start, step, i))) contiguously from `dst` on:
// ArangeHost on the device. InvalidArgument as ArangeHost, and if dst is not
// aligned to the element size.
absl::Status ArangeCuda(void* dst, int64_t numel, double start, double step,
                        DType dtype, CUstream_st* stream);

// Copies every element (elem_size bytes, any size >= 1) of the view `src` of
// `src_base` to the element with the same multi-index in the view `dst` of
// `dst_base`: CopyStrided on the device. Buffers need no alignment.
// InvalidArgument if the shapes differ (naming both layouts), elem_size is
// 0, `dst` has a stride-0 dim of size > 1, or a base is null while the view
// is not empty.
absl::Status CopyStridedCuda(const void* src_base, const Layout& src,
                             void* dst_base, const Layout& dst,
                             size_t elem_size, CUstream_st* stream);

// Converts each element of the view `src` (elements of src_type) of
// `src_base` into the element with the same multi-index in the view `dst`
// (dst_type) of `dst_base`, by ConvertValue (convert_rules.h): ConvertStrided
// on the device. Equal dtypes copy the bytes unchanged. InvalidArgument for
// a dtype that is not a DType, differing shapes (naming both layouts), a
// stride-0 dim of size > 1 in `dst`, a null base while the view is not
// empty, or a base not aligned to its element size.
absl::Status ConvertCuda(const void* src_base, const Layout& src,
                         DType src_type, void* dst_base, const Layout& dst,
                         DType dst_type, CUstream_st* stream);

}  // namespace genesis::storage::kernels

#endif  // GENESIS_STORAGE_KERNELS_CUDA_KERNELS_H_
