// Calling the CUDA driver API (cu* functions) from genesis code. Entry points are
// resolved through the runtime (cudaGetDriverEntryPointByVersion), so nothing links
// libcuda and a missing or old driver is an error, never a crash; results become
// absl::Status. Includes cuda.h, so it exists only in a build with CUDA; include it from
// .cc files only.
#ifndef GENESIS_CUDA_INTERNAL_DRIVER_H_
#define GENESIS_CUDA_INTERNAL_DRIVER_H_

#include <cuda.h>

#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace genesis::cuda {

// The driver's `symbol` (its CUDA 12.0 ABI version). FailedPrecondition naming the
// symbol when the driver does not provide it.
absl::Status ResolveDriverSymbol(const char* symbol, void** fn);

// The same, typed: ResolveDriverFunction("cuMemMap", &map) with
// decltype(&::cuMemMap) map.
template <typename Fn>
absl::Status ResolveDriverFunction(const char* symbol, Fn* fn) {
  void* p = nullptr;
  absl::Status status = ResolveDriverSymbol(symbol, &p);
  if (status.ok()) *fn = reinterpret_cast<Fn>(p);
  return status;
}

// The same, or null where the driver lacks `symbol`: for a call with a runtime
// fallback, resolved once into a function-local static (`static const auto fn =
// DriverFunctionOrNull<decltype(&::cuEventRecord)>("cuEventRecord");`).
template <typename Fn>
Fn DriverFunctionOrNull(const char* symbol) {
  Fn fn = nullptr;
  ResolveDriverFunction(symbol, &fn).IgnoreError();
  return fn;
}

// OK for CUDA_SUCCESS; otherwise "<call> on cuda:<device>: <error name>" (no device part
// for device < 0) as ResourceExhausted (out of memory), FailedPrecondition (not
// supported), InvalidArgument (invalid value) or Internal.
absl::Status DriverStatus(CUresult result, std::string_view call, int device = -1);

// The driver's virtual-memory and sharing functions (cuMem*, cuPointerGetAttribute),
// resolved once for the process.
struct VirtualMemoryApi {
  decltype(&::cuDeviceGet) device_get = nullptr;
  decltype(&::cuDeviceGetAttribute) device_get_attribute = nullptr;
  decltype(&::cuMemGetAllocationGranularity) get_granularity = nullptr;
  decltype(&::cuMemAddressReserve) address_reserve = nullptr;
  decltype(&::cuMemAddressFree) address_free = nullptr;
  decltype(&::cuMemCreate) create = nullptr;
  decltype(&::cuMemRelease) release = nullptr;
  decltype(&::cuMemMap) map = nullptr;
  decltype(&::cuMemUnmap) unmap = nullptr;
  decltype(&::cuMemSetAccess) set_access = nullptr;
  decltype(&::cuMemGetAddressRange) get_address_range = nullptr;
  decltype(&::cuPointerGetAttribute) pointer_get_attribute = nullptr;
  decltype(&::cuMemRetainAllocationHandle) retain_allocation_handle = nullptr;
  decltype(&::cuMemExportToShareableHandle) export_handle = nullptr;
  decltype(&::cuMemImportFromShareableHandle) import_handle = nullptr;
};

// The table, every entry set; FailedPrecondition naming the first function the driver
// lacks (the same answer on every call).
absl::StatusOr<const VirtualMemoryApi*> LoadVirtualMemoryApi();

}  // namespace genesis::cuda

#endif  // GENESIS_CUDA_INTERNAL_DRIVER_H_
