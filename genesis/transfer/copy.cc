#include "genesis/transfer/copy.h"

#include <cstdint>
#include <cstring>

#include "absl/strings/str_format.h"
#include "genesis/core/status.h"
#include "genesis/cuda/device_query.h"
#include "genesis/transfer/internal/cuda_copy.h"

namespace genesis::transfer {
namespace {

absl::Status CheckCopy(void* dst, Device dst_device, const void* src, Device src_device,
                       size_t nbytes) {
  if (nbytes == 0) return absl::OkStatus();
  if (dst == nullptr || src == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "copy of %d bytes from %p on %s to %p on %s: a pointer is null", nbytes, src,
        src_device.ToString(), dst, dst_device.ToString()));
  }
  const auto d = reinterpret_cast<uintptr_t>(dst);
  const auto s = reinterpret_cast<uintptr_t>(src);
  if (dst_device == src_device && d < s + nbytes && s < d + nbytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "copy of %d bytes from %p to %p on %s: source and destination overlap", nbytes,
        src, dst, dst_device.ToString()));
  }
  for (const Device& device : {dst_device, src_device}) {
    if (device.is_cuda()) GENESIS_RETURN_IF_ERROR(cuda::CheckDeviceIndex(device.index()));
  }
  return absl::OkStatus();
}

absl::Status Copy(void* dst, Device dst_device, const void* src, Device src_device,
                  size_t nbytes, CUstream_st* stream, bool synchronize) {
  GENESIS_RETURN_IF_ERROR(CheckCopy(dst, dst_device, src, src_device, nbytes));
  if (nbytes == 0) return absl::OkStatus();
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, nbytes);
    return absl::OkStatus();
  }
  return internal::CudaCopy(dst, dst_device, src, src_device, nbytes, stream, synchronize);
}

}  // namespace

absl::Status CopyBytes(void* dst, Device dst_device, const void* src, Device src_device,
                       size_t nbytes, CUstream_st* stream) {
  return Copy(dst, dst_device, src, src_device, nbytes, stream, /*synchronize=*/true);
}

absl::Status CopyBytesAsync(void* dst, Device dst_device, const void* src,
                            Device src_device, size_t nbytes, CUstream_st* stream) {
  return Copy(dst, dst_device, src, src_device, nbytes, stream, /*synchronize=*/false);
}

absl::Status Synchronize(Device device, CUstream_st* stream) {
  if (device.is_cpu()) return absl::OkStatus();
  GENESIS_RETURN_IF_ERROR(cuda::CheckDeviceIndex(device.index()));
  return internal::CudaSynchronize(device.index(), stream);
}

}  // namespace genesis::transfer
