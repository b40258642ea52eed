#include "genesis/memory/host_backend.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace genesis::memory {

HostBackend::HostBackend(size_t alignment)
    : alignment_(std::bit_ceil(std::max<size_t>(64, alignment))),
      name_(absl::StrCat("cpu host (aligned_alloc, ", alignment_, " B aligned)")) {}

absl::StatusOr<void*> HostBackend::AllocateSegment(size_t bytes) {
  if (bytes == 0) {
    return absl::InvalidArgumentError("HostBackend: segment of 0 bytes requested");
  }
  size_t rounded = 0;
  if (__builtin_add_overflow(bytes, alignment_ - 1, &rounded)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "HostBackend: segment size ", bytes, " overflows when rounded to ", alignment_));
  }
  rounded &= ~(alignment_ - 1);
  void* ptr = std::aligned_alloc(alignment_, rounded);
  if (ptr == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "aligned_alloc(", alignment_, ", ", rounded, ") failed: out of host memory"));
  }
  return ptr;
}

void HostBackend::FreeSegment(void* ptr, size_t /*bytes*/) { std::free(ptr); }

absl::StatusOr<BackendMemoryInfo> HostBackend::MemoryInfo() const {
  const long page = sysconf(_SC_PAGESIZE);
  const long total = sysconf(_SC_PHYS_PAGES);
  const long avail = sysconf(_SC_AVPHYS_PAGES);
  if (page <= 0 || total <= 0 || avail < 0) {
    return absl::UnavailableError(absl::StrCat(
        "sysconf could not report host memory (page size ", page, ", physical pages ",
        total, ", available pages ", avail, ")"));
  }
  BackendMemoryInfo info;
  info.total_bytes = static_cast<size_t>(total) * static_cast<size_t>(page);
  info.free_bytes = static_cast<size_t>(avail) * static_cast<size_t>(page);
  return info;
}

}  // namespace genesis::memory
