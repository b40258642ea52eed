#include "genesis/cuda/peer_access.h"

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "genesis/core/status.h"
#include "genesis/cuda/device_guard.h"
#include "genesis/cuda/device_query.h"
#include "genesis/cuda/internal/check.h"

namespace genesis::cuda {

absl::Status EnablePeerAccess(int from, int to) {
  GENESIS_RETURN_IF_ERROR(CheckDeviceIndex(from));
  GENESIS_RETURN_IF_ERROR(CheckDeviceIndex(to));
  // Callers (the batch copier) come here on every peer copy: after the first call for
  // a pair, only the registry's lookup runs.
  return internal::ProcessPeerAccess().Enable(from, to, [&]() -> absl::Status {
    int can = 0;
    if (from != to) {
      const cudaError_t asked = cudaDeviceCanAccessPeer(&can, from, to);
      if (asked != cudaSuccess) IgnoreCudaError(asked);  // Then `can` stays 0.
    }
    if (can == 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("cuda:", from, " has no peer access to cuda:", to));
    }
    GENESIS_ASSIGN_OR_RETURN(DeviceGuard guard, DeviceGuard::Create(from));
    const cudaError_t err = cudaDeviceEnablePeerAccess(to, 0);
    if (err == cudaErrorPeerAccessAlreadyEnabled) {
      IgnoreCudaError(err);  // Enabled by someone else: fine.
      return absl::OkStatus();
    }
    return err == cudaSuccess
               ? absl::OkStatus()
               : CudaStatus(err, absl::StrCat("cudaDeviceEnablePeerAccess(", to, ")"), from);
  });
}

}  // namespace genesis::cuda
