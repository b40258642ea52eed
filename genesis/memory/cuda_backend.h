// CudaDeviceBackend: GPU device memory from cudaMalloc, the Backend of a device pool.
//
// One backend serves one CUDA device. It makes that device current for each call (and
// restores the caller's), so any thread may use it. Out of memory is ResourceExhausted
// and leaves the CUDA runtime usable: the pool then frees cached segments and retries.
//
//   GENESIS_ASSIGN_OR_RETURN(std::unique_ptr<CudaDeviceBackend> backend,
//                            CudaDeviceBackend::Create(/*device=*/0));
//   GENESIS_ASSIGN_OR_RETURN(void* segment, backend->AllocateSegment(64 << 20));
//   ...
//   backend->FreeSegment(segment, 64 << 20);
//
// Where the driver and device support virtual memory management, the backend also
// offers it (CudaVirtualMemory), so pools put large blocks in expandable segments.
//
// Only in a build with CUDA (target //genesis/memory:cuda_backend); the header itself
// includes no CUDA header.
#ifndef GENESIS_MEMORY_CUDA_BACKEND_H_
#define GENESIS_MEMORY_CUDA_BACKEND_H_

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "genesis/core/device.h"
#include "genesis/memory/backend.h"

namespace genesis::memory {

class CudaVirtualMemory;

class CudaDeviceBackend : public Backend {
 public:
  // The alignment every segment has. The CUDA documentation promises only 256 bytes
  // for cudaMalloc; the addresses it returns are observed to be multiples of 512 (small
  // allocations are packed at 512-byte steps, large ones start on 2 MiB pages), and the
  // pool needs 512. The backend relies on that observation but checks every segment: one
  // that is not 512-aligned is freed and reported as an Internal error, never handed
  // out.
  static constexpr size_t kAlignment = 512;

  // A backend for CUDA device `device`. OutOfRange if that device does not exist here
  // (naming it and saying how many are visible, or why none is); FailedPrecondition in
  // the CPU-only build. Allocates nothing. With `virtual_memory`, also sets up the
  // device's virtual memory if it has any (without it, virtual_memory() is nullptr).
  static absl::StatusOr<std::unique_ptr<CudaDeviceBackend>> Create(
      int device, bool virtual_memory = true);

  CudaDeviceBackend(const CudaDeviceBackend&) = delete;
  CudaDeviceBackend& operator=(const CudaDeviceBackend&) = delete;
  ~CudaDeviceBackend() override;

  // cudaMalloc of `bytes` (> 0) on the backend's device. ResourceExhausted when the
  // device is out of memory (the CUDA error is cleared, so later calls are unaffected);
  // InvalidArgument for 0 bytes; the CUDA error as a status, naming the device and the
  // size, for anything else.
  absl::StatusOr<void*> AllocateSegment(size_t bytes) override;

  // cudaFree (which waits for work on the device to finish). Never fails: an error is
  // ignored and cleared.
  void FreeSegment(void* ptr, size_t bytes) override;

  // cudaMemGetInfo of the device: free and total device memory.
  absl::StatusOr<BackendMemoryInfo> MemoryInfo() const override;

  Device device() const override { return Device::Cuda(device_); }
  MemoryKind kind() const override { return MemoryKind::kDevice; }
  size_t alignment() const override { return kAlignment; }
  // "cuda:N device (cudaMalloc)", or "cuda:N device (cudaMalloc, cuMemMap)" with
  // virtual memory.
  std::string_view name() const override { return name_; }
  // The device's CudaVirtualMemory, or nullptr (see Create).
  VirtualMemory* virtual_memory() override;
  // The same with its CUDA interface (pieces, listeners), for layers above the pool.
  CudaVirtualMemory* cuda_virtual_memory() const { return vm_.get(); }

 private:
  CudaDeviceBackend(int device, std::unique_ptr<CudaVirtualMemory> vm);

  const int device_;
  const std::unique_ptr<CudaVirtualMemory> vm_;
  const std::string name_;
};

}  // namespace genesis::memory

#endif  // GENESIS_MEMORY_CUDA_BACKEND_H_
