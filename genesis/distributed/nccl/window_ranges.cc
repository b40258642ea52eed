#include "genesis/distributed/nccl/window_ranges.h"

#include <algorithm>

namespace genesis::distributed::nccl_backend {

void WindowRanges::Add(const void* data, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  windows_.push_back({reinterpret_cast<uintptr_t>(data), bytes});
}

void WindowRanges::Remove(const void* data) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto start = reinterpret_cast<uintptr_t>(data);
  std::erase_if(windows_, [&](const auto& w) { return w.first == start; });
}

bool WindowRanges::ContainsAll(absl::Span<const std::pair<const void*, size_t>> buffers) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (windows_.empty() || buffers.empty()) return false;
  return std::all_of(buffers.begin(), buffers.end(), [&](const auto& buffer) {
    const auto p = reinterpret_cast<uintptr_t>(buffer.first);
    return std::any_of(windows_.begin(), windows_.end(), [&](const auto& w) {
      // Offsets from the window's start, so that nothing wraps.
      return p >= w.first && p - w.first <= w.second && buffer.second <= w.second - (p - w.first);
    });
  });
}

}  // namespace genesis::distributed::nccl_backend
