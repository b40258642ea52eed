// CPU-only build: no kernels exist, so every entry point says so.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "genesis/core/absl_compat.h"
#include "genesis/core/dtype.h"
#include "genesis/storage/kernels/cuda_kernels.h"
#include "genesis/storage/layout.h"

namespace genesis::storage::kernels {
namespace {

absl::Status BuiltWithoutCuda(std::string_view function) {
  return absl::FailedPreconditionError(absl::StrCat(
      ToAbsl(function),
      ": genesis was built without CUDA (CPU-only build), so it has no "
      "CUDA kernels"));
}

}  // namespace

absl::Status FillCuda(void*, int64_t, const void*, size_t, CUstream_st*) {
  return BuiltWithoutCuda("FillCuda");
}

absl::Status ArangeCuda(void*, int64_t, double, double, DType, CUstream_st*) {
  return BuiltWithoutCuda("ArangeCuda");
}

absl::Status CopyStridedCuda(const void*, const Layout&, void*, const Layout&,
                             size_t, CUstream_st*) {
  return BuiltWithoutCuda("CopyStridedCuda");
}

absl::Status ConvertCuda(const void*, const Layout&, DType, void*,
                         const Layout&, DType, CUstream_st*) {
  return BuiltWithoutCuda("ConvertCuda");
}

}  // namespace genesis::storage::kernels
