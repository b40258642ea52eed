// Conversion of CUDA runtime errors into absl::Status, for genesis code that calls the
// CUDA runtime directly (the `.cc` files of a build with CUDA).
//
// This header includes <cuda_runtime_api.h>, so it must never be included from a public
// header: public headers stay free of CUDA so that the CPU-only build compiles them.
//
// Usage:
//
//   GENESIS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
//   GENESIS_CUDA_RETURN_IF_ERROR_ON(device, cudaMemGetInfo(&free, &total));
//   if (err != cudaSuccess) return CudaStatus(err, "cudaMalloc(1048576 bytes)", device);
//
// Every conversion of a failed call clears the thread's "last error" (cudaGetLastError),
// so that a non-sticky error such as cudaErrorMemoryAllocation does not resurface from a
// later, unrelated cudaGetLastError/cudaPeekAtLastError. Sticky errors (e.g. an illegal
// address in a kernel) cannot be cleared: the CUDA context stays unusable and the
// process has to restart; their messages say so.

#ifndef GENESIS_CUDA_INTERNAL_CHECK_H_
#define GENESIS_CUDA_INTERNAL_CHECK_H_

#include <cuda_runtime_api.h>

#include <string_view>

#include "absl/status/status.h"

namespace genesis::cuda {

// The absl code that best describes `err`: cudaErrorMemoryAllocation ->
// kResourceExhausted; invalid values and handles -> kInvalidArgument; an invalid device
// ordinal -> kOutOfRange; no device, no or insufficient driver -> kUnavailable;
// unsupported operations -> kUnimplemented; everything else -> kInternal.
// cudaSuccess -> kOk.
absl::StatusCode CudaErrorToStatusCode(cudaError_t err);

// True for the errors that corrupt the CUDA context of the process for good (illegal
// address, device-side assert, launch failure, ...): every later CUDA call fails too.
bool IsStickyCudaError(cudaError_t err);

// Returns OkStatus() for cudaSuccess. Otherwise clears the thread's last CUDA error and
// returns a status with code CudaErrorToStatusCode(err) and the message
//   "<call> failed on cuda:<device>: <cudaGetErrorName> (<cudaGetErrorString>)"
// ("on cuda:<device>" is left out when `device` < 0). `call` says what was attempted,
// e.g. "cudaMalloc(1048576 bytes)".
absl::Status CudaStatus(cudaError_t err, std::string_view call, int device = -1);

// Clears the thread's last CUDA error if `err` is a failure; for best-effort calls whose
// result is deliberately ignored (destructors).
void IgnoreCudaError(cudaError_t err) noexcept;

namespace internal {

// Switches the calling thread to `device` if it is not current and switches back on
// destruction. Never fails: a failed switch is ignored (and cleared). For destructors,
// which must not fail; everything else uses genesis::cuda::DeviceGuard.
class BestEffortDeviceSwitch {
 public:
  explicit BestEffortDeviceSwitch(int device) noexcept;
  ~BestEffortDeviceSwitch();

  BestEffortDeviceSwitch(const BestEffortDeviceSwitch&) = delete;
  BestEffortDeviceSwitch& operator=(const BestEffortDeviceSwitch&) = delete;

 private:
  int previous_ = -1;  // -1: nothing to restore.
};

}  // namespace internal
}  // namespace genesis::cuda

// Evaluates `call_expr` (a CUDA runtime call returning cudaError_t) once; on failure
// returns CudaStatus(error, "<call_expr as written>") from the enclosing function, which
// must return absl::Status or absl::StatusOr<T>.
#define GENESIS_CUDA_RETURN_IF_ERROR(call_expr) \
  GENESIS_CUDA_RETURN_IF_ERROR_ON(-1, call_expr)

// Like GENESIS_CUDA_RETURN_IF_ERROR, naming `device` (an int) in the message.
#define GENESIS_CUDA_RETURN_IF_ERROR_ON(device, call_expr)                       \
  do {                                                                           \
    const ::cudaError_t genesis_cuda_error_ = (call_expr);                       \
    if (genesis_cuda_error_ != ::cudaSuccess) {                                  \
      return ::genesis::cuda::CudaStatus(genesis_cuda_error_, #call_expr, (device)); \
    }                                                                            \
  } while (false)

#endif  // GENESIS_CUDA_INTERNAL_CHECK_H_
