// CudaVirtualMemory: VirtualMemory on a CUDA device through the driver's virtual memory
// management (cuMemAddressReserve, cuMemCreate, cuMemMap, cuMemSetAccess), the memory
// behind expandable segments on a GPU.
//
// Memory is mapped in pieces (mapping_pieces.h): each piece, one or more chunks (the
// device's allocation granularity, 2 MiB on current GPUs), is one physical allocation
// (cuMemCreate), unmapped and returned whole. Mapped memory is readable and writable by
// the device, and by each peer GPU once peer access from that GPU to this device has been
// enabled through cuda::EnablePeerAccess (peer_access.h; the batch copier does it before
// its first peer copy): what is mapped then is opened to the peer, and so is what is
// mapped later. Opening memory to every capable peer at every map instead made maps 2-20
// times as slow on a two-GPU machine, and most processes never copy between GPUs. The
// pieces are created exportable as POSIX file descriptors where the device supports it
// (for sharing between processes, and for NCCL's buffer registration).
//
// Layers above follow the pieces through listeners (PieceListener: told after a piece is
// mapped and before it is unmapped) and PieceContaining; the NCCL backend registers
// whole pieces with NCCL this way, since a registered range must lie inside one
// physical allocation.
//
// The driver's functions are found at run time through the CUDA runtime
// (cudaGetDriverEntryPointByVersion), so nothing links against libcuda and a machine
// without a driver, or a driver or device without virtual memory management, gives an
// error from Create, never a crash. Only in a build with CUDA.
#ifndef GENESIS_MEMORY_CUDA_VIRTUAL_MEMORY_H_
#define GENESIS_MEMORY_CUDA_VIRTUAL_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "genesis/cuda/peer_access.h"
#include "genesis/memory/deferred_unmaps.h"
#include "genesis/memory/mapping_pieces.h"
#include "genesis/memory/virtual_memory.h"

namespace genesis::memory {

class CudaVirtualMemory : public VirtualMemory, private cuda::PeerAccessListener {
 public:
  // Virtual memory on CUDA device `device`. FailedPrecondition when the driver lacks
  // the functions or the device does not support virtual memory management; the CUDA
  // error otherwise (OutOfRange for a device that does not exist).
  static absl::StatusOr<std::unique_ptr<CudaVirtualMemory>> Create(int device);

  // Unmaps and releases whatever is still mapped, and frees the reservations.
  ~CudaVirtualMemory() override;

  size_t granularity() const override { return granularity_; }
  absl::StatusOr<void*> Reserve(size_t bytes) override;
  void Unreserve(void* base, size_t bytes) override;
  // One cuMemCreate and cuMemMap per piece, one cuMemSetAccess for the range.
  // ResourceExhausted when cuMemCreate runs out of device memory; InvalidArgument for a
  // range that is not chunk-aligned or already mapped in part, or a bad `cut.max_piece`;
  // the driver's error otherwise.
  absl::Status MapPieces(void* ptr, size_t bytes, const PieceCut& cut) override;
  // Hands the pieces to a thread of this object's own (deferred_unmaps.h) and returns:
  // that thread waits for the device's queued work (as cudaFree does, since unmapping
  // memory that queued kernels still use would fault them), tells the listeners, and
  // makes one cuMemUnmap and cuMemRelease per piece. Until then the pieces' memory is
  // still the device's: MapPieces waits for them where it maps over them, or when
  // cuMemCreate runs out of memory while some are still on their way back.
  absl::Status Unmap(void* ptr, size_t bytes) override;
  // Waits for the unmaps handed over; the first cudaDeviceSynchronize error that one
  // met (the pieces were unmapped and released all the same).
  absl::Status FinishUnmaps() override;
  std::pair<uintptr_t, uintptr_t> PieceAt(uintptr_t p) const override;

  // Listeners hear of every piece after MapPieces has mapped it (and given access), on
  // the thread that maps, and before Unmap's thread, or the destructor, unmaps it, the
  // device synchronized. Not owned;
  // RemovePieceListener waits for a call in progress, so the listener may be destroyed
  // once it has returned (mapping_pieces.h says what listeners must not do). Thread-safe.
  void AddPieceListener(PieceListener* listener) { listeners_.Add(listener); }
  void RemovePieceListener(PieceListener* listener) { listeners_.Remove(listener); }

  // The mapped piece that contains `p` (its start, size and CUDA allocation handle), or
  // nullopt for an address that no piece holds. Thread-safe.
  std::optional<Piece> PieceContaining(const void* p) const;

  int device() const { return device_; }
  // The devices that get access to mapped memory: this one, then each peer whose access
  // to this device has been enabled. Thread-safe.
  std::vector<int> accessors() const;
  // True if chunks are exportable as POSIX file descriptors.
  bool exportable() const { return exportable_; }

 private:
  CudaVirtualMemory(int device, size_t granularity, bool exportable);
  // Opens what is mapped to `from` and adds it to the accessors, if `to` is this device
  // (cuda::PeerAccessListener). Takes mu_.
  absl::Status GrantPeerAccess(int from, int to) override;
  // MapPieces' work, under mu_: the pieces it mapped go to `mapped` (none on an error).
  absl::Status MapAndGiveAccess(uintptr_t start, size_t bytes, const PieceCut& cut,
                                std::vector<Piece>& mapped);
  // Unmaps and releases `pieces` (each mapped by MapPieces and still in pieces_, which
  // forgets them). Needs mu_.
  void ReleasePiecesLocked(const std::vector<Piece>& pieces);
  // The deferred part of Unmap, on deferred_'s thread: waits for the device, tells the
  // listeners, unmaps and releases `pieces` (no longer in pieces_). Takes no lock of
  // this object's.
  absl::Status SyncAndRelease(const std::vector<Piece>& pieces);

  const int device_;
  const size_t granularity_;
  const bool exportable_;
  mutable std::mutex mu_;
  std::vector<int> accessors_;  // Under mu_.
  PieceMap pieces_;  // Handles are CUmemGenericAllocationHandle.
  absl::flat_hash_map<uintptr_t, size_t> reservations_;    // Base -> bytes.
  // Called without mu_ held, so that a listener may take its own locks in any order
  // with a thread that looks pieces up.
  PieceListeners listeners_;
  // Unmapped pieces on their way back (lock order: mu_, then deferred_'s). Last, so that
  // its thread is gone before anything it uses.
  DeferredUnmaps deferred_;
};

}  // namespace genesis::memory

#endif  // GENESIS_MEMORY_CUDA_VIRTUAL_MEMORY_H_
