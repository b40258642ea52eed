#include <algorithm>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "genesis/cuda/peer_access.h"

namespace genesis::cuda {
namespace internal {

absl::Status PeerAccessRegistry::Enable(int from, int to,
                                        const std::function<absl::Status()>& enable) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = enabled_.find({from, to}); it != enabled_.end()) return it->second;
  absl::Status status = enable();
  if (status.ok()) {
    for (PeerAccessListener* listener : listeners_) {
      status.Update(listener->GrantPeerAccess(from, to));
    }
  }
  enabled_.emplace(std::make_pair(from, to), status);
  return status;
}

std::vector<std::pair<int, int>> PeerAccessRegistry::Add(PeerAccessListener* listener) {
  std::lock_guard<std::mutex> lock(mu_);
  listeners_.push_back(listener);
  std::vector<std::pair<int, int>> pairs;
  for (const auto& [pair, status] : enabled_) {
    if (status.ok()) pairs.push_back(pair);
  }
  return pairs;
}

void PeerAccessRegistry::Remove(PeerAccessListener* listener) {
  std::lock_guard<std::mutex> lock(mu_);
  std::erase(listeners_, listener);
}

PeerAccessRegistry& ProcessPeerAccess() {
  static auto* registry = new PeerAccessRegistry();
  return *registry;
}

}  // namespace internal

std::vector<std::pair<int, int>> AddPeerAccessListener(PeerAccessListener* listener) {
  return internal::ProcessPeerAccess().Add(listener);
}

void RemovePeerAccessListener(PeerAccessListener* listener) {
  internal::ProcessPeerAccess().Remove(listener);
}

}  // namespace genesis::cuda
