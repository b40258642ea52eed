// CudaDeviceBackend (CUDA builds only).

#include "genesis/memory/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "genesis/core/byte_size.h"
#include "genesis/core/status.h"
#include "genesis/cuda/device_guard.h"
#include "genesis/cuda/device_query.h"
#include "genesis/cuda/internal/check.h"
#include "genesis/memory/cuda_virtual_memory.h"

namespace genesis::memory {

absl::StatusOr<std::unique_ptr<CudaDeviceBackend>> CudaDeviceBackend::Create(
    int device, bool virtual_memory) {
  GENESIS_RETURN_IF_ERROR(cuda::CheckDeviceIndex(device));
  std::unique_ptr<CudaVirtualMemory> vm;
  if (virtual_memory) {
    // Without virtual memory the pool uses classic segments only.
    absl::StatusOr<std::unique_ptr<CudaVirtualMemory>> created =
        CudaVirtualMemory::Create(device);
    if (created.ok()) vm = *std::move(created);
  }
  return std::unique_ptr<CudaDeviceBackend>(new CudaDeviceBackend(device, std::move(vm)));
}

CudaDeviceBackend::CudaDeviceBackend(int device, std::unique_ptr<CudaVirtualMemory> vm)
    : device_(device),
      vm_(std::move(vm)),
      name_(absl::StrCat("cuda:", device, " device (cudaMalloc",
                         vm_ != nullptr ? ", cuMemMap" : "", ")")) {}

CudaDeviceBackend::~CudaDeviceBackend() = default;

VirtualMemory* CudaDeviceBackend::virtual_memory() { return vm_.get(); }

absl::StatusOr<void*> CudaDeviceBackend::AllocateSegment(size_t bytes) {
  if (bytes == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot allocate a segment of 0 bytes on cuda:", device_));
  }
  GENESIS_ASSIGN_OR_RETURN(cuda::DeviceGuard guard, cuda::DeviceGuard::Create(device_));
  void* ptr = nullptr;
  const cudaError_t err = cudaMalloc(&ptr, bytes);
  if (err != cudaSuccess) {
    // cudaErrorMemoryAllocation becomes ResourceExhausted; CudaStatus clears the error.
    return cuda::CudaStatus(
        err, absl::StrCat("cudaMalloc(", bytes, " bytes = ", FormatByteSize(bytes), ")"),
        device_);
  }
  if (ptr == nullptr) {
    return absl::InternalError(
        absl::StrCat("cudaMalloc(", bytes, " bytes) on cuda:", device_,
                     " succeeded but returned nullptr"));
  }
  if (reinterpret_cast<uintptr_t>(ptr) % kAlignment != 0) {
    cuda::IgnoreCudaError(cudaFree(ptr));
    return absl::InternalError(absl::StrCat(
        "cudaMalloc(", bytes, " bytes) on cuda:", device_, " returned ", absl::Hex(ptr),
        ", which is not aligned to ", kAlignment, " bytes as the memory pool requires"));
  }
  return ptr;
}

void CudaDeviceBackend::FreeSegment(void* ptr, size_t /*bytes*/) {
  if (ptr == nullptr) return;
  cuda::internal::BestEffortDeviceSwitch on_device(device_);
  cuda::IgnoreCudaError(cudaFree(ptr));
}

absl::StatusOr<BackendMemoryInfo> CudaDeviceBackend::MemoryInfo() const {
  GENESIS_ASSIGN_OR_RETURN(const cuda::MemoryInfo info, cuda::GetMemoryInfo(device_));
  return BackendMemoryInfo{.free_bytes = info.free_bytes, .total_bytes = info.total_bytes};
}

}  // namespace genesis::memory
