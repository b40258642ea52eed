#include "genesis/memory/mapping_pieces.h"

#include <algorithm>
#include <bit>
#include <iterator>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace genesis::memory {

absl::Status CheckMaxPiece(size_t max_piece, size_t chunk, const char* what) {
  if (std::has_single_bit(max_piece) && max_piece >= chunk) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s: pieces of at most %d bytes: not a power of two of at least a chunk (%d bytes)",
      what, max_piece, chunk));
}

std::vector<Piece> SplitIntoPieces(uintptr_t origin, uintptr_t start, size_t bytes,
                                   size_t chunk, const PieceCut& cut) {
  std::vector<Piece> pieces;
  const uintptr_t end = start + bytes;
  uintptr_t p = start;
  if (cut.layout == PieceLayout::kWhole) {
    for (; p < end; p += pieces.back().size) {
      pieces.push_back(Piece{p, std::min<size_t>(cut.max_piece, end - p), 0});
    }
    return pieces;
  }
  while (p < end) {
    // The largest power of two the offset is aligned to (offset 0: any).
    const uintptr_t offset = p - origin;
    size_t size =
        offset == 0 ? cut.max_piece : std::min<size_t>(cut.max_piece, offset & (~offset + 1));
    while (size > end - p) size /= 2;
    size = std::max(size, chunk);
    if (!pieces.empty() && (size < cut.min_piece || pieces.back().size < cut.min_piece) &&
        pieces.back().size + size <= cut.max_piece) {
      pieces.back().size += size;
    } else {
      pieces.push_back(Piece{p, size, 0});
    }
    p += size;
  }
  return pieces;
}

bool PieceMap::Overlaps(uintptr_t start, size_t bytes) const {
  auto it = pieces_.lower_bound(start);
  if (it != pieces_.end() && it->first < start + bytes) return true;
  if (it == pieces_.begin()) return false;
  return std::prev(it)->second.end() > start;
}

void PieceMap::Insert(const Piece& piece) {
  pieces_.emplace(piece.start, piece);
  mapped_bytes_ += piece.size;
}

std::optional<Piece> PieceMap::Containing(uintptr_t p) const {
  auto it = pieces_.upper_bound(p);
  if (it == pieces_.begin()) return std::nullopt;
  --it;
  if (it->second.end() <= p) return std::nullopt;
  return it->second;
}

std::pair<uintptr_t, uintptr_t> PieceMap::BoundsAt(uintptr_t p, size_t chunk) const {
  if (std::optional<Piece> piece = Containing(p)) return {piece->start, piece->end()};
  const uintptr_t start = p & ~(chunk - 1);
  return {start, start + chunk};
}

absl::StatusOr<std::vector<Piece>> PieceMap::Tiling(uintptr_t start, size_t bytes,
                                                    const char* what) const {
  std::vector<Piece> tiling;
  const uintptr_t end = start + bytes;
  uintptr_t p = start;
  auto it = pieces_.find(start);
  if (it == pieces_.end()) {
    if (std::optional<Piece> in = Containing(start)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s(%#x, %d): starts inside the mapped piece [%#x, %#x), which can only be "
          "unmapped whole",
          what, start, bytes, in->start, in->end()));
    }
    return absl::InvalidArgumentError(
        absl::StrFormat("%s(%#x, %d): %#x is not mapped", what, start, bytes, start));
  }
  for (; p < end; ++it) {
    if (it == pieces_.end() || it->first != p) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s(%#x, %d): %#x is not mapped", what, start, bytes, p));
    }
    if (it->second.end() > end) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s(%#x, %d): the mapped piece [%#x, %#x) sticks out of the range, and can "
          "only be unmapped whole",
          what, start, bytes, it->second.start, it->second.end()));
    }
    tiling.push_back(it->second);
    p = it->second.end();
  }
  return tiling;
}

std::optional<Piece> PieceMap::Erase(uintptr_t start) {
  auto it = pieces_.find(start);
  if (it == pieces_.end()) return std::nullopt;
  Piece piece = it->second;
  mapped_bytes_ -= piece.size;
  pieces_.erase(it);
  return piece;
}

std::vector<Piece> PieceMap::EraseWithin(uintptr_t start, size_t bytes) {
  std::vector<Piece> erased;
  for (auto it = pieces_.lower_bound(start);
       it != pieces_.end() && it->second.end() <= start + bytes;) {
    erased.push_back(it->second);
    mapped_bytes_ -= it->second.size;
    it = pieces_.erase(it);
  }
  return erased;
}

void PieceListeners::Add(PieceListener* listener) {
  std::lock_guard<std::mutex> lock(mu_);
  if (std::find(listeners_.begin(), listeners_.end(), listener) == listeners_.end()) {
    listeners_.push_back(listener);
  }
}

void PieceListeners::Remove(PieceListener* listener) {
  std::lock_guard<std::mutex> lock(mu_);
  listeners_.erase(std::remove(listeners_.begin(), listeners_.end(), listener),
                   listeners_.end());
}

void PieceListeners::Mapped(const std::vector<Piece>& pieces) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (PieceListener* listener : listeners_) {
    for (const Piece& piece : pieces) listener->OnMapped(piece);
  }
}

void PieceListeners::Unmapping(const std::vector<Piece>& pieces) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (PieceListener* listener : listeners_) {
    for (const Piece& piece : pieces) listener->OnUnmapping(piece);
  }
}

size_t PieceListeners::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return listeners_.size();
}

}  // namespace genesis::memory
