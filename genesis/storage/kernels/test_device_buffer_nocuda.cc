// CPU-only build: there is no device memory to hand out.
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "genesis/storage/kernels/test_device_buffer.h"

namespace genesis::storage::kernels {
namespace {

absl::Status NoDevice() {
  return absl::FailedPreconditionError(
      "DeviceBuffer: genesis was built without CUDA (CPU-only build)");
}

}  // namespace

absl::StatusOr<DeviceBuffer> DeviceBuffer::Create(size_t) { return NoDevice(); }

DeviceBuffer::~DeviceBuffer() = default;

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  data_ = std::exchange(other.data_, nullptr);
  size_ = std::exchange(other.size_, 0);
  return *this;
}

absl::Status DeviceBuffer::Upload(absl::Span<const uint8_t>, size_t) {
  return NoDevice();
}

absl::StatusOr<std::vector<uint8_t>> DeviceBuffer::Download() const {
  return NoDevice();
}

}  // namespace genesis::storage::kernels
