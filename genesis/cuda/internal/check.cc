#include "genesis/cuda/internal/check.h"

#include <cuda_runtime_api.h>

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace genesis::cuda {

absl::StatusCode CudaErrorToStatusCode(cudaError_t err) {
  switch (err) {
    case cudaSuccess:
      return absl::StatusCode::kOk;
    case cudaErrorMemoryAllocation:
    case cudaErrorLaunchOutOfResources:
    case cudaErrorTooManyPeers:
      return absl::StatusCode::kResourceExhausted;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidConfiguration:
    case cudaErrorInvalidPitchValue:
    case cudaErrorInvalidSymbol:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidMemcpyDirection:
    case cudaErrorInvalidResourceHandle:
    case cudaErrorIllegalState:
      return absl::StatusCode::kInvalidArgument;
    case cudaErrorInvalidDevice:
      return absl::StatusCode::kOutOfRange;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorStubLibrary:
    case cudaErrorCallRequiresNewerDriver:
    case cudaErrorDevicesUnavailable:
    case cudaErrorSystemNotReady:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorInitializationError:
    case cudaErrorNotReady:
      return absl::StatusCode::kUnavailable;
    case cudaErrorNotSupported:
    case cudaErrorPeerAccessUnsupported:
      return absl::StatusCode::kUnimplemented;
    case cudaErrorPeerAccessAlreadyEnabled:
    case cudaErrorHostMemoryAlreadyRegistered:
      return absl::StatusCode::kAlreadyExists;
    case cudaErrorPeerAccessNotEnabled:
    case cudaErrorHostMemoryNotRegistered:
    case cudaErrorCudartUnloading:
      return absl::StatusCode::kFailedPrecondition;
    case cudaErrorLaunchTimeout:
      return absl::StatusCode::kDeadlineExceeded;
    default:
      return absl::StatusCode::kInternal;
  }
}

bool IsStickyCudaError(cudaError_t err) {
  switch (err) {
    case cudaErrorECCUncorrectable:
    case cudaErrorContained:
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchFailure:
#if CUDART_VERSION >= 12080
    case cudaErrorTensorMemoryLeak:
#endif
    case cudaErrorMpsClientTerminated:
    case cudaErrorExternalDevice:
      return true;
    default:
      return false;
  }
}

absl::Status CudaStatus(cudaError_t err, std::string_view call, int device) {
  if (err == cudaSuccess) return absl::OkStatus();
  // Reset the thread's last error so a non-sticky failure reported here does not
  // resurface later (sticky ones stay: they cannot be cleared).
  (void)cudaGetLastError();
  std::string message = absl::StrCat(absl::string_view(call.data(), call.size()), " failed");
  if (device >= 0) absl::StrAppend(&message, " on cuda:", device);
  absl::StrAppend(&message, ": ", cudaGetErrorName(err), " (", cudaGetErrorString(err),
                  ")");
  if (IsStickyCudaError(err)) {
    absl::StrAppend(&message,
                    "; this error is sticky: the CUDA context of this process is "
                    "unusable and the process must be restarted");
  }
  return absl::Status(CudaErrorToStatusCode(err), message);
}

void IgnoreCudaError(cudaError_t err) noexcept {
  if (err != cudaSuccess) (void)cudaGetLastError();
}

namespace internal {

BestEffortDeviceSwitch::BestEffortDeviceSwitch(int device) noexcept {
  int current = -1;
  const cudaError_t err = cudaGetDevice(&current);
  if (err != cudaSuccess) {
    IgnoreCudaError(err);
    return;
  }
  if (current == device) return;
  const cudaError_t set_err = cudaSetDevice(device);
  if (set_err != cudaSuccess) {
    IgnoreCudaError(set_err);
    return;
  }
  previous_ = current;
}

BestEffortDeviceSwitch::~BestEffortDeviceSwitch() {
  if (previous_ >= 0) IgnoreCudaError(cudaSetDevice(previous_));
}

}  // namespace internal
}  // namespace genesis::cuda
