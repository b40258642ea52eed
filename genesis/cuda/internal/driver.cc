#include "genesis/cuda/internal/driver.h"

#include <cuda_runtime_api.h>

#include "absl/strings/str_cat.h"
#include "genesis/core/absl_compat.h"
#include "genesis/cuda/internal/check.h"

namespace genesis::cuda {

absl::Status ResolveDriverSymbol(const char* symbol, void** fn) {
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t err =
      cudaGetDriverEntryPointByVersion(symbol, fn, 12000, cudaEnableDefault, &found);
  if (err != cudaSuccess || found != cudaDriverEntryPointSuccess || *fn == nullptr) {
    IgnoreCudaError(err);
    return absl::FailedPreconditionError(absl::StrCat(
        "the CUDA driver does not provide ", symbol,
        err != cudaSuccess ? absl::StrCat(" (", cudaGetErrorName(err), ")") : ""));
  }
  return absl::OkStatus();
}

absl::Status DriverStatus(CUresult result, std::string_view call, int device) {
  if (result == CUDA_SUCCESS) return absl::OkStatus();
  static decltype(&::cuGetErrorName) get_error_name = [] {
    decltype(&::cuGetErrorName) fn = nullptr;
    ResolveDriverFunction("cuGetErrorName", &fn).IgnoreError();
    return fn;
  }();
  const char* name = nullptr;
  if (get_error_name == nullptr || get_error_name(result, &name) != CUDA_SUCCESS ||
      name == nullptr) {
    name = "unknown CUresult";
  }
  const std::string text =
      absl::StrCat(ToAbsl(call), device >= 0 ? absl::StrCat(" on cuda:", device) : "", ": ",
                   name, " (", static_cast<int>(result), ")");
  if (result == CUDA_ERROR_OUT_OF_MEMORY) return absl::ResourceExhaustedError(text);
  if (result == CUDA_ERROR_NOT_SUPPORTED) return absl::FailedPreconditionError(text);
  if (result == CUDA_ERROR_INVALID_VALUE) return absl::InvalidArgumentError(text);
  return absl::InternalError(text);
}

}  // namespace genesis::cuda
