// Logic shared by both implementations of genesis/cuda (with CUDA and CPU-only):
// messages, validation and formatting that need no CUDA header. Implemented in
// runtime_common.cc, which both builds compile. Not part of the public API.

#ifndef GENESIS_CUDA_INTERNAL_COMMON_H_
#define GENESIS_CUDA_INTERNAL_COMMON_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "genesis/core/absl_compat.h"

namespace genesis::cuda::internal {

using ::genesis::ToAbsl;

// The reason given everywhere the CPU-only build cannot do something.
inline constexpr std::string_view kBuiltWithoutCuda =
    "genesis was built without CUDA support (CPU-only build)";

// FailedPrecondition("genesis was built without CUDA support (CPU-only build); cannot
// <what> (rebuild with a CUDA toolkit, e.g. --config=cuda)").
absl::Status NoCudaSupportError(std::string_view what);

// The check behind CheckDeviceIndex: OK iff 0 <= index < count, else OutOfRange
// "device 'cuda:<index>' does not exist: ..." saying how many devices are visible, or
// `no_device_reason` when none is.
absl::Status DeviceIndexStatus(int index, int count, std::string_view no_device_reason);

// FailedPrecondition("<what> on an empty <class_name> (default-constructed or moved-from)").
absl::Status EmptyHandleError(std::string_view class_name, std::string_view what);

// "; CUDA_VISIBLE_DEVICES='<value>'" when that variable is set, else "".
std::string VisibleDevicesNote();

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" from the 16 bytes of a CUDA UUID.
std::string FormatUuid(const char* bytes16);

// "dddd:bb:dd.0" (lower-case hex), as nvidia-smi and cudaDeviceGetPCIBusId print it.
std::string FormatPciBusId(int domain, int bus, int device);

}  // namespace genesis::cuda::internal

#endif  // GENESIS_CUDA_INTERNAL_COMMON_H_
