// The address ranges of a communicator's symmetric windows (AllocateSymmetric), so that
// an operation whose buffers all lie in them runs where NCCL's symmetric kernels serve
// it. Plain C++, tested on the CPU; thread-safe.
#ifndef GENESIS_DISTRIBUTED_NCCL_WINDOW_RANGES_H_
#define GENESIS_DISTRIBUTED_NCCL_WINDOW_RANGES_H_

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/types/span.h"

namespace genesis::distributed::nccl_backend {

class WindowRanges {
 public:
  // A window of `bytes` at `data`.
  void Add(const void* data, size_t bytes);
  // Forgets the window that starts at `data` (none: nothing).
  void Remove(const void* data);
  // Whether every (start, bytes) buffer of `buffers` lies whole inside one window: false
  // for none, or when no window is known.
  bool ContainsAll(absl::Span<const std::pair<const void*, size_t>> buffers) const;

 private:
  mutable std::mutex mu_;
  std::vector<std::pair<uintptr_t, size_t>> windows_;  // Start and size.
};

}  // namespace genesis::distributed::nccl_backend

#endif  // GENESIS_DISTRIBUTED_NCCL_WINDOW_RANGES_H_
