#include "genesis/cuda/internal/driver.h"

#include <cuda_runtime_api.h>

#include <initializer_list>
#include <utility>

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
  static const auto get_error_name =
      DriverFunctionOrNull<decltype(&::cuGetErrorName)>("cuGetErrorName");
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

absl::StatusOr<const VirtualMemoryApi*> LoadVirtualMemoryApi() {
  static const absl::StatusOr<VirtualMemoryApi> api = []() -> absl::StatusOr<VirtualMemoryApi> {
    VirtualMemoryApi d;
    for (const auto& [symbol, fn] : std::initializer_list<std::pair<const char*, void**>>{
             {"cuDeviceGet", reinterpret_cast<void**>(&d.device_get)},
             {"cuDeviceGetAttribute", reinterpret_cast<void**>(&d.device_get_attribute)},
             {"cuMemGetAllocationGranularity", reinterpret_cast<void**>(&d.get_granularity)},
             {"cuMemAddressReserve", reinterpret_cast<void**>(&d.address_reserve)},
             {"cuMemAddressFree", reinterpret_cast<void**>(&d.address_free)},
             {"cuMemCreate", reinterpret_cast<void**>(&d.create)},
             {"cuMemRelease", reinterpret_cast<void**>(&d.release)},
             {"cuMemMap", reinterpret_cast<void**>(&d.map)},
             {"cuMemUnmap", reinterpret_cast<void**>(&d.unmap)},
             {"cuMemSetAccess", reinterpret_cast<void**>(&d.set_access)},
             {"cuMemGetAddressRange", reinterpret_cast<void**>(&d.get_address_range)},
             {"cuPointerGetAttribute", reinterpret_cast<void**>(&d.pointer_get_attribute)},
             {"cuMemRetainAllocationHandle",
              reinterpret_cast<void**>(&d.retain_allocation_handle)},
             {"cuMemExportToShareableHandle", reinterpret_cast<void**>(&d.export_handle)},
             {"cuMemImportFromShareableHandle", reinterpret_cast<void**>(&d.import_handle)},
         }) {
      absl::Status status = ResolveDriverSymbol(symbol, fn);
      if (!status.ok()) return status;
    }
    return d;
  }();
  if (!api.ok()) return api.status();
  return &*api;
}

}  // namespace genesis::cuda
