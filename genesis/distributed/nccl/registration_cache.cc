#include "genesis/distributed/nccl/registration_cache.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "genesis/core/byte_size.h"

namespace genesis::distributed::nccl_backend {

std::string RegistrationStats::ToString() const {
  auto plural = [](int64_t n, const char* one, const char* many) {
    return absl::StrCat(n, " ", n == 1 ? one : many);
  };
  return absl::StrCat(enabled ? "on" : "off", ": ", plural(hits, "hit", "hits"), ", ",
                      plural(misses, "miss", "misses"), ", ", unregistered, " unregistered, ",
                      plural(failures, "failure", "failures"), ", ",
                      plural(deregistrations, "deregistration", "deregistrations"), "; ",
                      plural(pieces, "piece", "pieces"), " (",
                      FormatByteSize(static_cast<uint64_t>(bytes)), "); ", staged, " staged (",
                      FormatByteSize(static_cast<uint64_t>(staging_bytes)), " staging)");
}

RegistrationCache::RegistrationCache(FindPiece find, Register reg, Deregister dereg)
    : find_(std::move(find)), register_(std::move(reg)), deregister_(std::move(dereg)) {
  stats_.enabled = true;
}

bool RegistrationCache::Prepare(const void* data, size_t bytes) {
  // Looked up before taking mu_: the piece of a live buffer stays mapped meanwhile.
  const std::optional<memory::Piece> piece = find_(data);
  const auto begin = reinterpret_cast<uintptr_t>(data);
  std::lock_guard<std::mutex> lock(mu_);
  if (!piece.has_value() || bytes > piece->end() - begin || refused_.contains(piece->start)) {
    ++stats_.unregistered;
    return false;
  }
  if (auto it = registered_.find(piece->start); it != registered_.end()) {
    if (it->second.size == piece->size) {
      ++stats_.hits;
      return true;
    }
    DropLocked(piece->start);  // A piece of another size now starts there.
  }
  absl::StatusOr<void*> handle = register_(*piece);
  if (!handle.ok()) {
    ++stats_.failures;
    ++stats_.unregistered;
    refused_.insert(piece->start);
    return false;
  }
  registered_[piece->start] = Entry{piece->size, *handle};
  ++stats_.misses;
  ++stats_.pieces;
  stats_.bytes += static_cast<int64_t>(piece->size);
  return true;
}

void RegistrationCache::DropLocked(uintptr_t start) {
  auto it = registered_.find(start);
  if (it == registered_.end()) return;
  deregister_(it->second.handle);
  ++stats_.deregistrations;
  --stats_.pieces;
  stats_.bytes -= static_cast<int64_t>(it->second.size);
  registered_.erase(it);
}

void RegistrationCache::OnUnmapping(const memory::Piece& piece) {
  std::lock_guard<std::mutex> lock(mu_);
  refused_.erase(piece.start);
  DropLocked(piece.start);
}

void RegistrationCache::DeregisterAll() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<uintptr_t> starts;
  starts.reserve(registered_.size());
  for (const auto& [start, entry] : registered_) starts.push_back(start);
  for (uintptr_t start : starts) DropLocked(start);
  refused_.clear();
}

RegistrationStats RegistrationCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace genesis::distributed::nccl_backend
