// Where a memory pool gets its memory from: the raw allocator behind a CachingAllocator.
//
// A Backend hands out and takes back whole segments (large, rarely requested regions);
// the pool carves blocks out of them. One Backend serves one device and one kind of
// memory. Implementations: HostBackend (plain aligned host memory), TestBackend (host
// memory that can be told to fail or to run out, for tests), and, in a build with CUDA,
// CudaDeviceBackend (cudaMalloc) and PinnedHostBackend (cudaHostAlloc or
// cudaHostRegister). The pool serialises its calls into one backend only as far as the
// backend's own contract requires: implementations must be thread-safe.
#ifndef GENESIS_MEMORY_BACKEND_H_
#define GENESIS_MEMORY_BACKEND_H_

#include <cstddef>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "genesis/core/device.h"
#include "genesis/memory/virtual_memory.h"

namespace genesis::memory {

enum class MemoryKind {
  kHost,        // Pageable host memory.
  kPinnedHost,  // Page-locked host memory, readable by the GPU's copy engines.
  kDevice,      // GPU device memory.
};

// "host", "pinned_host", "device".
std::string_view MemoryKindName(MemoryKind kind);

// Free and total bytes of the memory a backend draws from, as the OOM message reports
// them. For host memory, "total" is the machine's physical memory.
struct BackendMemoryInfo {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // Returns `bytes` (> 0) of memory aligned to at least alignment(), or
  // ResourceExhausted when the memory is not there (the pool then frees cached segments
  // and retries), or another error for anything else. Never returns nullptr with OK.
  virtual absl::StatusOr<void*> AllocateSegment(size_t bytes) = 0;

  // Returns a segment obtained from AllocateSegment with the same `bytes`. The caller
  // guarantees that no work still uses it (the pool waits for stream events first).
  virtual void FreeSegment(void* ptr, size_t bytes) = 0;

  // Free and total memory now, for messages and for the memory-fraction limit.
  virtual absl::StatusOr<BackendMemoryInfo> MemoryInfo() const = 0;

  virtual Device device() const = 0;
  virtual MemoryKind kind() const = 0;
  // Alignment of every segment's start (a power of two, at least 512 for the pool).
  virtual size_t alignment() const = 0;
  // A short name for messages and summaries, e.g. "cuda:0 device (cudaMalloc)".
  virtual std::string_view name() const = 0;

  // The backend's virtual memory, for expandable segments, or nullptr when it has none
  // (the default) and pools use classic segments only. Owned by the backend.
  virtual VirtualMemory* virtual_memory() { return nullptr; }
};

}  // namespace genesis::memory

#endif  // GENESIS_MEMORY_BACKEND_H_
