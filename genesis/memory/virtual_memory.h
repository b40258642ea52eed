// Virtual memory for expandable segments: address ranges reserved once and backed by
// physical memory chunk by chunk.
//
// A pool over classic segments asks its Backend for a new segment whenever no cached
// block fits, so memory freed in the middle of an old segment cannot serve a larger
// request, and "reserved but unallocated" memory grows (fragmentation). With virtual
// memory, a pool reserves one large address range per stream and maps physical memory
// into it only where blocks need it: a request that does not fit a free block grows a
// free neighbour in place, and free chunks in the middle of a range are unmapped, their
// memory returned, and mapped again where it is needed. CUDA offers this through its
// driver's virtual memory management (cuMemAddressReserve, cuMemCreate, cuMemMap,
// cuMemSetAccess: CudaVirtualMemory); HostVirtualMemory emulates it with mmap and a
// memfd, so the same pool logic runs, and is tested, on any Linux machine.
//
// Physical memory comes in pieces (mapping_pieces.h): one or more chunks that were
// created together and can only be unmapped together. Larger pieces cost fewer driver
// calls; the pool chooses their largest size (`expandable_piece_size`).
//
// A Backend that supports it returns a VirtualMemory from Backend::virtual_memory().
// Implementations must be thread-safe.
#ifndef GENESIS_MEMORY_VIRTUAL_MEMORY_H_
#define GENESIS_MEMORY_VIRTUAL_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "genesis/memory/piece_layout.h"

namespace genesis::memory {

class VirtualMemory {
 public:
  virtual ~VirtualMemory() = default;

  // The chunk size (a power of two): reservations, and every range passed to Map and
  // Unmap, start and end on multiples of it.
  virtual size_t granularity() const = 0;

  // Reserves `bytes` (a positive multiple of granularity()) of address space with no
  // memory behind it, aligned to granularity(). ResourceExhausted if no address range
  // of that size is left.
  virtual absl::StatusOr<void*> Reserve(size_t bytes) = 0;

  // Gives back a range from Reserve (same `bytes`); nothing in it is mapped any more.
  virtual void Unreserve(void* base, size_t bytes) = 0;

  // Backs [ptr, ptr + bytes), chunk-aligned, inside a reservation and not mapped, with
  // new physical memory, readable and writable by the owning device (and, on CUDA, by
  // peers whose access was enabled: cuda_virtual_memory.h), in pieces cut as `cut` says
  // (piece_layout.h, mapping_pieces.h; cut.max_piece a power of two, at least
  // granularity()).
  // Implementations may back it in smaller pieces; the chunk is the smallest. On any
  // error nothing stays mapped: ResourceExhausted when the memory is not there,
  // InvalidArgument for a bad range or piece size, another status for anything else.
  virtual absl::Status MapPieces(void* ptr, size_t bytes, const PieceCut& cut) = 0;

  // Map in pieces of one chunk: every chunk can be unmapped on its own.
  absl::Status Map(void* ptr, size_t bytes) {
    return MapPieces(ptr, bytes, PieceCut{.max_piece = granularity()});
  }

  // Unmaps [ptr, ptr + bytes), which must be made of whole pieces that MapPieces mapped
  // (InvalidArgument naming the piece otherwise, and nothing is unmapped), and returns
  // their physical memory. The caller guarantees that no work it has not yet queued
  // will use it. Implementations may finish the unmapping after returning (on CUDA, a
  // thread of its own waits for the device's queued work first); the range may be
  // mapped again at once all the same, and FinishUnmaps waits for the memory.
  virtual absl::Status Unmap(void* ptr, size_t bytes) = 0;

  // Returns once the memory of every earlier Unmap is back with the device, with the
  // first error that finishing one of them met since the last call (OK if none).
  virtual absl::Status FinishUnmaps() { return absl::OkStatus(); }

  // The bounds [first, second) of the mapped piece that contains `p`, so that a caller
  // can narrow a range it wants to unmap to whole pieces. For an address in no piece,
  // the chunk that contains it.
  virtual std::pair<uintptr_t, uintptr_t> PieceAt(uintptr_t p) const = 0;
};

}  // namespace genesis::memory

#endif  // GENESIS_MEMORY_VIRTUAL_MEMORY_H_
