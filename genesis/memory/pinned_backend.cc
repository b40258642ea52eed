// PinnedHostBackend (CUDA builds only).

#include "genesis/memory/pinned_backend.h"

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "genesis/core/byte_size.h"
#include "genesis/cuda/device_query.h"
#include "genesis/cuda/internal/check.h"
#include "genesis/memory/pinned_mode.h"

namespace genesis::memory {
namespace {

size_t PageSize() {
  const long page = sysconf(_SC_PAGESIZE);
  return page > 0 ? static_cast<size_t>(page) : 4096;
}

// Unavailable, with the reason, when no CUDA device (hence no driver) is usable.
absl::Status CheckDriver(std::string_view what) {
  if (cuda::DeviceCount() > 0) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(
      "cannot ", absl::string_view(what.data(), what.size()),
      ": pinned host memory needs a CUDA device and driver, and none is usable (",
      cuda::NoDeviceReason(), ")"));
}

std::string SizeText(size_t bytes) {
  return absl::StrCat(bytes, " bytes = ", FormatByteSize(bytes));
}

// MemAvailable of /proc/meminfo in bytes, or 0 when it cannot be read.
uint64_t MemAvailableBytes() {
  FILE* file = std::fopen("/proc/meminfo", "r");
  if (file == nullptr) return 0;
  uint64_t bytes = 0;
  char line[256];
  while (std::fgets(line, sizeof(line), file) != nullptr) {
    unsigned long long kib = 0;
    if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) {
      bytes = static_cast<uint64_t>(kib) * 1024;
      break;
    }
  }
  std::fclose(file);
  return bytes;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PinnedHostBackend>> PinnedHostBackend::Create(
    PinnedMode mode) {
  if (absl::Status status = CheckDriver("create a pinned host memory backend");
      !status.ok()) {
    return status;
  }
  return std::unique_ptr<PinnedHostBackend>(new PinnedHostBackend(mode, PageSize()));
}

PinnedHostBackend::PinnedHostBackend(PinnedMode mode, size_t page_size)
    : mode_(mode),
      page_size_(page_size),
      name_(mode == PinnedMode::kRegister ? "pinned host (cudaHostRegister)"
                                          : "pinned host (cudaHostAlloc)") {}

absl::StatusOr<bool> PinnedHostBackend::IsPinned(const void* ptr) {
  if (ptr == nullptr) return false;
  if (absl::Status status = CheckDriver("tell whether memory is pinned"); !status.ok()) {
    return status;
  }
  cudaPointerAttributes attributes;
  std::memset(&attributes, 0, sizeof(attributes));
  const cudaError_t err = cudaPointerGetAttributes(&attributes, ptr);
  if (err == cudaErrorInvalidValue) {
    // What runtimes before CUDA 11 said for memory CUDA does not know.
    cuda::IgnoreCudaError(err);
    return false;
  }
  if (err != cudaSuccess) {
    return cuda::CudaStatus(err, absl::StrCat("cudaPointerGetAttributes(", absl::Hex(ptr), ")"));
  }
  return attributes.type == cudaMemoryTypeHost;
}

absl::StatusOr<void*> PinnedHostBackend::AllocateSegment(size_t bytes) {
  if (bytes == 0) {
    return absl::InvalidArgumentError("cannot allocate a pinned host segment of 0 bytes");
  }
  // Pinning more than the machine has can never succeed; checked first so that no
  // overcommitted giant allocation is ever made (and sanitizers see no absurd size).
  if (const long pages = sysconf(_SC_PHYS_PAGES);
      pages > 0 && bytes / page_size_ >= static_cast<size_t>(pages)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot pin ", SizeText(bytes), " of host memory: the machine has only ",
        FormatByteSize(static_cast<size_t>(pages) * page_size_), " of physical memory"));
  }
  void* ptr = nullptr;
  if (mode_ == PinnedMode::kAlloc) {
    const cudaError_t err = cudaHostAlloc(&ptr, bytes, cudaHostAllocPortable);
    if (err != cudaSuccess) {
      // cudaErrorMemoryAllocation becomes ResourceExhausted; CudaStatus clears the error.
      return cuda::CudaStatus(
          err, absl::StrCat("cudaHostAlloc(", SizeText(bytes), ", cudaHostAllocPortable)"));
    }
    if (ptr == nullptr || reinterpret_cast<uintptr_t>(ptr) % kAlignment != 0) {
      if (ptr != nullptr) cuda::IgnoreCudaError(cudaFreeHost(ptr));
      return absl::InternalError(absl::StrCat(
          "cudaHostAlloc(", SizeText(bytes), ") returned ", absl::Hex(ptr),
          ", which is not aligned to ", kAlignment, " bytes as the memory pool requires"));
    }
    return ptr;
  }

  // kRegister: whole pages, so that no other allocation shares a pinned page.
  if (bytes > SIZE_MAX - page_size_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", SizeText(bytes), " of host memory to pin"));
  }
  const size_t rounded = (bytes + page_size_ - 1) / page_size_ * page_size_;
  ptr = std::aligned_alloc(page_size_, rounded);
  if (ptr == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot allocate ", SizeText(rounded), " of host memory to pin (aligned_alloc failed)"));
  }
  const cudaError_t err = cudaHostRegister(ptr, rounded, cudaHostRegisterPortable);
  if (err != cudaSuccess) {
    std::free(ptr);
    return cuda::CudaStatus(
        err, absl::StrCat("cudaHostRegister(", SizeText(rounded), ", cudaHostRegisterPortable)"));
  }
  return ptr;
}

void PinnedHostBackend::FreeSegment(void* ptr, size_t /*bytes*/) {
  if (ptr == nullptr) return;
  if (mode_ == PinnedMode::kAlloc) {
    cuda::IgnoreCudaError(cudaFreeHost(ptr));
    return;
  }
  cuda::IgnoreCudaError(cudaHostUnregister(ptr));
  std::free(ptr);
}

absl::StatusOr<BackendMemoryInfo> PinnedHostBackend::MemoryInfo() const {
  const long pages = sysconf(_SC_PHYS_PAGES);
  if (pages <= 0) {
    return absl::InternalError("cannot read the physical memory size (sysconf(_SC_PHYS_PAGES))");
  }
  BackendMemoryInfo info;
  info.total_bytes = static_cast<size_t>(pages) * page_size_;
  uint64_t available = MemAvailableBytes();
  if (available == 0) {
    const long free_pages = sysconf(_SC_AVPHYS_PAGES);
    if (free_pages > 0) available = static_cast<uint64_t>(free_pages) * page_size_;
  }
  info.free_bytes = static_cast<size_t>(available < info.total_bytes ? available
                                                                     : info.total_bytes);
  return info;
}

}  // namespace genesis::memory
