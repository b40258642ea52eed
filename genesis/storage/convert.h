// Converting buffers of elements from one dtype to another on the CPU,
// contiguous or through strided views (layout.h), by the rules of
// convert_rules.h.
//
//   std::vector<genesis::Half> out(n);
//   GENESIS_RETURN_IF_ERROR(genesis::storage::ConvertContiguous(
//       floats.data(), DType::kFloat32, out.data(), DType::kFloat16, n));
//
// Each (source, destination) dtype pair has its own tight loop, chosen once
// per call, so the per-element work is the conversion alone and the
// compiler can vectorise it. Single-threaded.
//
// Elements are read and written with unaligned-safe loads and stores, so
// buffers need no particular alignment. bool elements are stored as one
// byte: any nonzero byte reads as true, and true is written as 1. Converting
// to the same dtype copies the bytes unchanged (NaN payloads, bool bytes
// other than 0 and 1).
//
// Source and destination must not overlap. Views must fit their buffers
// (Layout::CheckFits); that is not checked here.
#ifndef GENESIS_STORAGE_CONVERT_H_
#define GENESIS_STORAGE_CONVERT_H_

#include <cstdint>

#include "absl/status/status.h"
#include "genesis/core/dtype.h"
#include "genesis/storage/layout.h"

namespace genesis::storage {

// Converts the `count` elements of type src_type at `src` to dst_type,
// writing them contiguously at `dst`. InvalidArgument, with nothing written,
// if a dtype is not a DType enumerator (the message gives its number), if
// count is negative, or if a pointer is null while count > 0.
// Uses up to `threads` threads as the strided copies do (strided_copy.h: one per
// MiB of the larger side at most; kAllCores for one per hardware thread); the
// result is the same on any number.
absl::Status ConvertContiguous(const void* src, DType src_type, void* dst,
                               DType dst_type, int64_t count, int threads = 1);

// Converts each element of the view `src_layout` of the buffer at `src_base`
// (pointing at base element 0, like every view's base) into the element with
// the same multi-index in the view `dst_layout` of `dst_base`.
// InvalidArgument, with nothing written, for a bad dtype (as above), if the
// shapes differ (naming both), or if a non-empty destination has a stride-0
// dim of size > 1 (two elements would be written to one place). Uses up to
// `threads` threads, as above.
absl::Status ConvertStrided(const void* src_base, const Layout& src_layout,
                            DType src_type, void* dst_base,
                            const Layout& dst_layout, DType dst_type,
                            int threads = 1);

}  // namespace genesis::storage

#endif  // GENESIS_STORAGE_CONVERT_H_
