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

// OK for CUDA_SUCCESS; otherwise "<call> on cuda:<device>: <error name>" (no device part
// for device < 0) as ResourceExhausted (out of memory), FailedPrecondition (not
// supported), InvalidArgument (invalid value) or Internal.
absl::Status DriverStatus(CUresult result, std::string_view call, int device = -1);

}  // namespace genesis::cuda

#endif  // GENESIS_CUDA_INTERNAL_DRIVER_H_
