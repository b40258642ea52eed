// HostVirtualMemory: the VirtualMemory interface emulated on Linux host memory, so that
// expandable segments (mapping, unmapping, growth in place, hysteresis) run and are
// tested without a GPU.
//
// Reserve is an anonymous PROT_NONE mapping without swap reservation; Map places chunks
// of one memfd into it with MAP_FIXED (MAP_SHARED, so the memory behind an address is a
// slot of the memfd that can move to another address); Unmap puts the PROT_NONE
// reservation back over the range and punches the slots' pages out of the memfd, which
// returns their memory to the system. Chunk slots are reused, lowest first. Pages are
// only allocated when touched, so tests can map gigabytes they never write.
//
//   GENESIS_ASSIGN_OR_RETURN(auto vm, HostVirtualMemory::Create());
//   GENESIS_ASSIGN_OR_RETURN(void* base, vm->Reserve(1 << 30));
//   GENESIS_RETURN_IF_ERROR(vm->Map(base, 4 << 20));   // 4 MiB usable at base
//   GENESIS_RETURN_IF_ERROR(vm->Unmap(base, 2 << 20));  // first 2 MiB returned
#ifndef GENESIS_MEMORY_HOST_VIRTUAL_MEMORY_H_
#define GENESIS_MEMORY_HOST_VIRTUAL_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "genesis/memory/mapping_pieces.h"
#include "genesis/memory/virtual_memory.h"

namespace genesis::memory {

class HostVirtualMemory : public VirtualMemory {
 public:
  static constexpr size_t kDefaultGranularity = size_t{2} << 20;  // As on CUDA GPUs.

  // `granularity`: a power of two that is a multiple of the page size; InvalidArgument
  // naming it otherwise. The memfd's error if the kernel has no memfd_create.
  static absl::StatusOr<std::unique_ptr<HostVirtualMemory>> Create(
      size_t granularity = kDefaultGranularity);

  // Unmaps and unreserves whatever is left, and closes the memfd.
  ~HostVirtualMemory() override;

  size_t granularity() const override { return granularity_; }
  absl::StatusOr<void*> Reserve(size_t bytes) override;
  void Unreserve(void* base, size_t bytes) override;
  // InvalidArgument for a range that is not chunk-aligned, not reserved or already
  // mapped in part, or a bad `cut.max_piece`; the system's error (ResourceExhausted for
  // ENOMEM/ENOSPC) otherwise. The memory is mapped chunk by chunk, but remembered in
  // the pieces a CUDA device would use, so that Unmap holds callers to whole pieces.
  absl::Status MapPieces(void* ptr, size_t bytes, const PieceCut& cut) override;
  // InvalidArgument for a range that is not chunk-aligned or not whole mapped pieces.
  absl::Status Unmap(void* ptr, size_t bytes) override;
  std::pair<uintptr_t, uintptr_t> PieceAt(uintptr_t p) const override;

  // Bytes mapped now.
  size_t mapped_bytes() const;

 private:
  HostVirtualMemory(int fd, size_t granularity);
  // Takes a free memfd slot (growing the file when none is free).
  absl::StatusOr<size_t> TakeSlotLocked();
  void ReturnSlotLocked(size_t slot);
  bool ReservedLocked(uintptr_t p, size_t bytes) const;
  // The base of the reservation that holds `p` (`p` itself if none does).
  uintptr_t ReservationBaseLocked(uintptr_t p) const;

  const int fd_;
  const size_t granularity_;
  mutable std::mutex mu_;
  size_t file_slots_ = 0;           // The memfd's size, in chunks.
  std::vector<size_t> free_slots_;  // A min-heap.
  absl::flat_hash_map<uintptr_t, size_t> slot_of_;  // Mapped chunk address -> slot.
  absl::flat_hash_map<uintptr_t, size_t> reservations_;  // Base -> bytes.
  PieceMap pieces_;
};

}  // namespace genesis::memory

#endif  // GENESIS_MEMORY_HOST_VIRTUAL_MEMORY_H_
