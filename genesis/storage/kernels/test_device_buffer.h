// Device memory for the kernel tests: cudaMalloc'd bytes on the current
// device with synchronous copies from and to the host. The test sources stay
// free of CUDA headers, so they compile in both builds; in the CPU-only build
// Create fails with FailedPrecondition. Testonly.
//
//   GENESIS_ASSIGN_OR_RETURN(DeviceBuffer buffer, DeviceBuffer::Create(64));
//   GENESIS_RETURN_IF_ERROR(buffer.Upload(host_bytes));
//   ... launch kernels writing buffer.data() ...
//   GENESIS_ASSIGN_OR_RETURN(std::vector<uint8_t> out, buffer.Download());
#ifndef GENESIS_STORAGE_KERNELS_TEST_DEVICE_BUFFER_H_
#define GENESIS_STORAGE_KERNELS_TEST_DEVICE_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace genesis::storage::kernels {

class DeviceBuffer {
 public:
  // `bytes` zeroed bytes on the current device; a CUDA error,
  // or FailedPrecondition in the CPU-only build.
  static absl::StatusOr<DeviceBuffer> Create(size_t bytes);

  DeviceBuffer() = default;
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // The device address of byte 0 (char*, so tests can offset it).
  char* data() const { return data_; }
  size_t size() const { return size_; }

  // Copies `bytes` to the buffer from byte `at` on (OutOfRange if they do
  // not fit). Synchronous.
  absl::Status Upload(absl::Span<const uint8_t> bytes, size_t at = 0);

  // The whole buffer, after all work queued on the device has finished
  // (cudaDeviceSynchronize, so a failed kernel on any stream shows here).
  absl::StatusOr<std::vector<uint8_t>> Download() const;

 private:
  DeviceBuffer(char* data, size_t size) : data_(data), size_(size) {}

  char* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace genesis::storage::kernels

#endif  // GENESIS_STORAGE_KERNELS_TEST_DEVICE_BUFFER_H_
