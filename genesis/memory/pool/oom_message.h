// The text of the pool's out-of-memory error: what was asked for and by whom, what the
// pool and the device hold, the limit that hit or what the backend said, and advice
// that holds for the current settings.
#ifndef GENESIS_MEMORY_POOL_OOM_MESSAGE_H_
#define GENESIS_MEMORY_POOL_OOM_MESSAGE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "genesis/memory/backend.h"

namespace genesis::memory::pool_internal {

// Why the last attempt to get more memory failed.
struct OomReason {
  // The memory_fraction cap, not the backend, refused it.
  bool limit_hit = false;
  // What the backend said (when !limit_hit).
  std::string backend_message;
};

// Everything the message reports, as the pool saw it when it gave up.
struct OomFigures {
  MemoryKind kind = MemoryKind::kHost;
  std::string device;        // Device::ToString().
  std::string backend_name;  // Backend::name().
  size_t requested = 0;      // Bytes asked for.
  size_t size = 0;           // Rounded block size.
  size_t needed = 0;         // What the backend was asked for: a segment, or chunks.
  int64_t allocated = 0;     // The pool's gauges (all pools).
  int64_t reserved = 0;
  int64_t cached = 0;
  int64_t largest_free_block = 0;
  // The backend's MemoryInfo(): free and total memory, or why they are unknown.
  absl::StatusOr<BackendMemoryInfo> device_memory;
  double memory_fraction = 1.0;
  size_t allowed_max = 0;  // The cap memory_fraction sets (reported if it hit).
  size_t total_bytes = 0;  // The backend's total memory when the pool was made (0: unknown).
  size_t max_split_size = 0;
};

// The message: "<CUDA OOM | pinned host OOM | host OOM>: <device> (<backend>) could not
// allocate ...", then the pool's and the device's memory, the largest free block and
// fragmentation ratio (1 - largest / cached, 0 with nothing cached), the limit that hit
// or the backend's message, and "Advice: ..." (raise memory_fraction if it hit; a
// request larger than the device; max_split_size when cached memory is fragmented into
// blocks too small for the request; always: free tensors or reduce the batch size).
std::string OomMessage(const OomFigures& figures, const OomReason& why);

}  // namespace genesis::memory::pool_internal

#endif  // GENESIS_MEMORY_POOL_OOM_MESSAGE_H_
