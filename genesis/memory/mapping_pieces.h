// Pieces: the physical allocations behind mapped virtual memory (virtual_memory.h).
//
// Backing every chunk of a mapped range with an allocation of its own costs a driver
// call per chunk to create, map, give access to, unmap and release it: on an H200,
// about 45 us per 2 MiB chunk to map, whatever the chunk's size, so mapping a GiB in
// 2 MiB chunks takes 22 ms and in 32 MiB pieces 1.4 ms. Larger pieces cost fewer calls;
// the price is that memory can only be given back a whole piece at a time, since the
// driver cannot unmap or release part of an allocation.
//
// SplitIntoPieces cuts a range into pieces (piece_layout.h): by default pieces whose
// sizes are powers of two (in chunks), each aligned to its own size, so that the pieces
// of any two ranges line up and a free range loses at most a piece at each end when it
// is narrowed to whole pieces; or as few as fit. PieceMap
// keeps the mapped pieces by address, each with the implementation's handle, and
// answers which pieces tile a range that is to be unmapped. PieceListener lets a layer
// above follow the pieces as they come and go (the NCCL backend registers whole pieces
// with NCCL, which needs a registered range to lie inside one physical allocation).
#ifndef GENESIS_MEMORY_MAPPING_PIECES_H_
#define GENESIS_MEMORY_MAPPING_PIECES_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "genesis/memory/piece_layout.h"

namespace genesis::memory {

struct Piece {
  uintptr_t start = 0;
  size_t size = 0;
  uint64_t handle = 0;  // The implementation's own (a CUDA allocation handle; 0 on hosts).

  uintptr_t end() const { return start + size; }
  friend bool operator==(const Piece&, const Piece&) = default;
};

// OK if `max_piece` is a power of two and at least `chunk`; else InvalidArgument naming
// it (`what` names the caller).
absl::Status CheckMaxPiece(size_t max_piece, size_t chunk, const char* what);

// The pieces that back [start, start + bytes), cut as `cut` says. kAligned: from
// `start` on, each is the largest power-of-two multiple of `chunk` that is at most
// cut.max_piece, that the offset from `origin` (the reservation's base, so that a range
// is cut the same way wherever the reservation landed) is aligned to, and that fits in
// what is left; then, from the first on, a piece joins the one before it where either
// is smaller than cut.min_piece and together they are at most cut.max_piece. kWhole:
// pieces of cut.max_piece from `start` on, the last one what is left. `start - origin`
// and `bytes` are multiples of `chunk`, and `chunk` and cut.max_piece powers of two with
// max_piece >= chunk (checked by the callers). Handles are 0.
std::vector<Piece> SplitIntoPieces(uintptr_t origin, uintptr_t start, size_t bytes,
                                   size_t chunk, const PieceCut& cut);

// The pieces mapped now, by address. Not thread-safe (callers hold their own lock).
class PieceMap {
 public:
  // True if any piece overlaps [start, start + bytes).
  bool Overlaps(uintptr_t start, size_t bytes) const;

  // Adds a piece that overlaps none.
  void Insert(const Piece& piece);

  // The piece that contains `p`, if any.
  std::optional<Piece> Containing(uintptr_t p) const;

  // The bounds [first, second) of the piece that contains `p`, or of the `chunk`-sized
  // chunk that does when no piece does (VirtualMemory::PieceAt).
  std::pair<uintptr_t, uintptr_t> BoundsAt(uintptr_t p, size_t chunk) const;

  // The pieces that exactly tile [start, start + bytes), in address order; else
  // InvalidArgument saying which address is not mapped or which piece sticks out of
  // the range (`what` names the caller in the message).
  absl::StatusOr<std::vector<Piece>> Tiling(uintptr_t start, size_t bytes,
                                            const char* what) const;

  // Removes the piece that starts at `start` (if any) and returns it.
  std::optional<Piece> Erase(uintptr_t start);

  // Removes and returns every piece inside [start, start + bytes).
  std::vector<Piece> EraseWithin(uintptr_t start, size_t bytes);

  bool empty() const { return pieces_.empty(); }
  size_t size() const { return pieces_.size(); }
  size_t mapped_bytes() const { return mapped_bytes_; }
  const std::map<uintptr_t, Piece>& pieces() const { return pieces_; }

 private:
  std::map<uintptr_t, Piece> pieces_;  // By start address.
  size_t mapped_bytes_ = 0;
};

// Hears of pieces as an implementation of VirtualMemory maps and unmaps them (where it
// offers listeners: CudaVirtualMemory). OnMapped comes on the thread that maps, which
// may hold the memory pool's lock; OnUnmapping on the thread that unmaps, which may be
// the implementation's own (CudaVirtualMemory's), while the pool's threads go on, and
// which maps wait for. Either way a listener returns promptly, never calls back into
// the VirtualMemory or its pool, and never adds or removes listeners.
class PieceListener {
 public:
  virtual ~PieceListener() = default;
  // After `piece` was mapped and made accessible.
  virtual void OnMapped(const Piece& piece) = 0;
  // Before `piece` is unmapped and its memory released, once no work on the device uses
  // it any more (the device was synchronized).
  virtual void OnUnmapping(const Piece& piece) = 0;
};

// The listeners of one VirtualMemory. Thread-safe: calls to the listeners are made with
// the list's lock held, so once Remove has returned, the removed listener is called no
// more and may be destroyed (Remove must therefore not be called with a lock that a
// listener takes).
class PieceListeners {
 public:
  // Adds `listener` (not owned) once; adding it again changes nothing.
  void Add(PieceListener* listener);
  // Removes `listener`, if present, waiting for a call to it in progress.
  void Remove(PieceListener* listener);
  // Calls OnMapped, or OnUnmapping, of every listener for every piece, in order.
  void Mapped(const std::vector<Piece>& pieces) const;
  void Unmapping(const std::vector<Piece>& pieces) const;
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::vector<PieceListener*> listeners_;
};

}  // namespace genesis::memory

#endif  // GENESIS_MEMORY_MAPPING_PIECES_H_
