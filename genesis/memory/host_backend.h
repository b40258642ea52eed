// The plain CPU memory source for a CachingAllocator: aligned pageable host memory.
//
// A host pool gains over malloc by keeping large, already-faulted segments around and by
// giving every block the pool's 512-byte alignment (vectorised kernels and DMA-friendly
// copies want it). HostBackend hands out segments with aligned_alloc and reports the
// machine's physical and available memory, so a host pool's OOM message and
// memory_fraction limit mean the same as a device pool's.
#ifndef GENESIS_MEMORY_HOST_BACKEND_H_
#define GENESIS_MEMORY_HOST_BACKEND_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "genesis/core/device.h"
#include "genesis/memory/backend.h"

namespace genesis::memory {

class HostBackend : public Backend {
 public:
  // Segments are aligned to max(64, alignment) rounded up to a power of two. The default
  // of 512 matches the pool's block rounding, so every block the pool carves is aligned
  // to 512 too.
  explicit HostBackend(size_t alignment = 512);

  // Returns `bytes` rounded up to alignment() of uninitialised memory, or
  // ResourceExhausted naming the size when the C library has none; InvalidArgument for
  // 0 bytes or a size that overflows when rounded.
  absl::StatusOr<void*> AllocateSegment(size_t bytes) override;
  void FreeSegment(void* ptr, size_t bytes) override;
  // Physical memory of the machine (total) and the pages the kernel reports available
  // (free), from sysconf.
  absl::StatusOr<BackendMemoryInfo> MemoryInfo() const override;

  Device device() const override { return Device::Cpu(); }
  MemoryKind kind() const override { return MemoryKind::kHost; }
  size_t alignment() const override { return alignment_; }
  std::string_view name() const override { return name_; }

 private:
  size_t alignment_;
  std::string name_;
};

}  // namespace genesis::memory

#endif  // GENESIS_MEMORY_HOST_BACKEND_H_
