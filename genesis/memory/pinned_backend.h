// PinnedHostBackend: page-locked ("pinned") host memory, the Backend of the pinned pool.
//
// The GPU's copy engines read and write pinned memory directly, so copies between it and
// the device run asynchronously and at full bus speed; pageable memory is staged through
// a driver buffer. Two ways to get it (PinnedMode, chosen with GENESIS_ALLOC_CONF's
// pinned_mode): kAlloc lets the driver allocate pinned memory (cudaHostAlloc); kRegister
// allocates ordinary page-aligned memory and pins it (cudaHostRegister), which some
// systems (and some IOMMU or virtualised setups) handle better. Both use the "portable"
// flag, so the memory is pinned for every CUDA device and context, and the segments
// belong to the CPU device (Device::Cpu()).
//
//   GENESIS_ASSIGN_OR_RETURN(std::unique_ptr<PinnedHostBackend> backend,
//                            PinnedHostBackend::Create(PinnedMode::kAlloc));
//
// Only in a build with CUDA (target //genesis/memory:pinned_backend); the header itself
// includes no CUDA header. Thread-safe.
#ifndef GENESIS_MEMORY_PINNED_BACKEND_H_
#define GENESIS_MEMORY_PINNED_BACKEND_H_

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "genesis/core/device.h"
#include "genesis/memory/backend.h"
#include "genesis/memory/pinned_mode.h"

namespace genesis::memory {

class PinnedHostBackend : public Backend {
 public:
  // Segment alignment. kRegister segments start on a page (at least 4096 bytes);
  // cudaHostAlloc is observed to return page-aligned memory too, but documents no
  // alignment, so the backend checks every kAlloc segment against this value (and
  // reports Internal, freeing the memory, should one ever fall short).
  static constexpr size_t kAlignment = 512;

  // A backend that pins memory the way `mode` says. Unavailable when no CUDA device is
  // usable here (no GPU, no driver, CUDA_VISIBLE_DEVICES hiding all), with the reason;
  // pinning needs the driver. Allocates nothing.
  static absl::StatusOr<std::unique_ptr<PinnedHostBackend>> Create(PinnedMode mode);

  // True iff `ptr` points into page-locked host memory that CUDA knows of (from
  // cudaHostAlloc, cudaMallocHost or cudaHostRegister, by any backend or library), per
  // cudaPointerGetAttributes; false for pageable host memory, device memory and
  // nullptr. Unavailable, never a crash, when no CUDA device is usable (no driver); the
  // CUDA error as a status if the runtime fails otherwise.
  static absl::StatusOr<bool> IsPinned(const void* ptr);

  PinnedHostBackend(const PinnedHostBackend&) = delete;
  PinnedHostBackend& operator=(const PinnedHostBackend&) = delete;

  // `bytes` (> 0) of pinned host memory. kAlloc: cudaHostAlloc(cudaHostAllocPortable).
  // kRegister: `bytes` rounded up to whole pages, page-aligned, then
  // cudaHostRegister(cudaHostRegisterPortable). ResourceExhausted when the memory
  // cannot be allocated or pinned for lack of memory, at once (without trying) when it
  // is as large as the machine's physical memory (a CUDA error is cleared);
  // InvalidArgument for 0 bytes; other CUDA errors as statuses naming the call and size.
  absl::StatusOr<void*> AllocateSegment(size_t bytes) override;

  // kAlloc: cudaFreeHost. kRegister: cudaHostUnregister, then frees the memory. Never
  // fails: CUDA errors are ignored and cleared.
  void FreeSegment(void* ptr, size_t bytes) override;

  // Host memory: total = physical memory; free = memory available to new allocations
  // (MemAvailable of /proc/meminfo, or the free pages where that is missing).
  absl::StatusOr<BackendMemoryInfo> MemoryInfo() const override;

  Device device() const override { return Device::Cpu(); }
  MemoryKind kind() const override { return MemoryKind::kPinnedHost; }
  size_t alignment() const override { return kAlignment; }
  // "pinned host (cudaHostAlloc)" or "pinned host (cudaHostRegister)".
  std::string_view name() const override { return name_; }

  PinnedMode mode() const { return mode_; }

 private:
  PinnedHostBackend(PinnedMode mode, size_t page_size);

  const PinnedMode mode_;
  const size_t page_size_;
  const std::string name_;
};

}  // namespace genesis::memory

#endif  // GENESIS_MEMORY_PINNED_BACKEND_H_
