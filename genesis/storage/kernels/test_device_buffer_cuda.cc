// DeviceBuffer with the CUDA runtime.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "genesis/core/status.h"
#include "genesis/cuda/internal/check.h"
#include "genesis/storage/kernels/test_device_buffer.h"

namespace genesis::storage::kernels {

absl::StatusOr<DeviceBuffer> DeviceBuffer::Create(size_t bytes) {
  void* data = nullptr;
  GENESIS_RETURN_IF_ERROR(cuda::CudaStatus(
      cudaMalloc(&data, bytes), absl::StrCat("cudaMalloc(", bytes, " bytes)")));
  DeviceBuffer buffer(static_cast<char*>(data), bytes);
  // Zeroed, so that a test reading back bytes no kernel wrote reads defined memory
  // (compute-sanitizer's initcheck).
  GENESIS_RETURN_IF_ERROR(
      cuda::CudaStatus(cudaMemset(data, 0, bytes), absl::StrCat("cudaMemset(", bytes, " bytes)")));
  return buffer;
}

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) cuda::IgnoreCudaError(cudaFree(data_));
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cuda::IgnoreCudaError(cudaFree(data_));
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

absl::Status DeviceBuffer::Upload(absl::Span<const uint8_t> bytes, size_t at) {
  if (at > size_ || bytes.size() > size_ - at) {
    return absl::OutOfRangeError(
        absl::StrCat("DeviceBuffer::Upload: ", bytes.size(), " bytes at ", at,
                     " do not fit in ", size_));
  }
  return cuda::CudaStatus(cudaMemcpy(data_ + at, bytes.data(), bytes.size(),
                                     cudaMemcpyHostToDevice),
                          "DeviceBuffer::Upload: cudaMemcpy");
}

absl::StatusOr<std::vector<uint8_t>> DeviceBuffer::Download() const {
  GENESIS_RETURN_IF_ERROR(
      cuda::CudaStatus(cudaDeviceSynchronize(),
                       "DeviceBuffer::Download: cudaDeviceSynchronize"));
  std::vector<uint8_t> bytes(size_);
  GENESIS_RETURN_IF_ERROR(cuda::CudaStatus(
      cudaMemcpy(bytes.data(), data_, size_, cudaMemcpyDeviceToHost),
      "DeviceBuffer::Download: cudaMemcpy"));
  return bytes;
}

}  // namespace genesis::storage::kernels
