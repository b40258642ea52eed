// Which pieces of pool memory one NCCL communicator has registered (ncclCommRegister),
// so that each is registered once and deregistered before its memory goes.
//
// NCCL (2.28) registers a range correctly only if it lies inside one physical
// allocation (one cuMemCreate: NVIDIA/nccl#1820), and ignores cudaMalloc memory. The
// device pools' expandable segments are mapped in pieces, each one such allocation
// (genesis/memory/cuda_virtual_memory.h), so the cache registers whole pieces: before an
// operation, each buffer that lies inside one piece gets that piece registered, once;
// later buffers in the same piece hit the cache. Buffers that span two pieces, or lie in
// no piece (classic segments, memory from elsewhere), are left unregistered, and NCCL
// copies them through its own buffers as usual, or the communicator copies them
// through registered memory of its own where the operation must run registered
// (staging_plan.h). When the pool unmaps a piece, the cache hears of it first
// (memory::PieceListener) and deregisters it.
//
// The cache knows nothing of NCCL or CUDA: the communicator gives it the functions that
// find a piece, register one and deregister a handle, so its bookkeeping is tested on
// any machine. Thread-safe; the register and deregister functions are called with the
// cache's lock held (take no lock in them that a thread may hold while calling Prepare).
// OnUnmapping comes on the device's unmapping thread (cuda_virtual_memory.h), not on
// the thread that issues operations, so the deregister function must serialise with
// the communicator's other calls: NCCL lets several threads operate a communicator
// only one at a time (NcclCommunicator takes its lock around every call). The piece
// is deregistered before its memory is unmapped, and while the unmapping thread is in
// OnUnmapping the pool can map nothing over it.
#ifndef GENESIS_DISTRIBUTED_NCCL_REGISTRATION_CACHE_H_
#define GENESIS_DISTRIBUTED_NCCL_REGISTRATION_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "genesis/memory/mapping_pieces.h"

namespace genesis::distributed::nccl_backend {

// Counters of one communicator's registrations (buffers are counted per operation).
struct RegistrationStats {
  bool enabled = false;          // Registration is on for this communicator.
  int64_t hits = 0;              // Buffers inside a piece registered before.
  int64_t misses = 0;            // Buffers whose piece was registered for them.
  int64_t unregistered = 0;      // Buffers in no piece or across pieces (NCCL copies).
  int64_t failures = 0;          // Pieces the register function refused.
  int64_t deregistrations = 0;   // Pieces deregistered (unmapped, or all at the end).
  int64_t pieces = 0;            // Pieces registered now,
  int64_t bytes = 0;             // and their bytes.
  // Kept by the communicator, not the cache (staging_plan.h):
  int64_t staged = 0;            // Buffers copied through the staging area,
  int64_t staging_bytes = 0;     // which is this large now (registered too).

  // "on: 3 hits, 1 miss, 0 unregistered, 0 failures, 0 deregistrations; 1 piece
  // (32.0 MiB); 0 staged (0 B staging)".
  std::string ToString() const;
};

class RegistrationCache final : public memory::PieceListener {
 public:
  // The piece that holds an address, if any (CudaVirtualMemory::PieceContaining).
  using FindPiece = std::function<std::optional<memory::Piece>(const void*)>;
  // Registers a whole piece; returns its handle.
  using Register = std::function<absl::StatusOr<void*>(const memory::Piece&)>;
  // Deregisters a handle that Register returned.
  using Deregister = std::function<void(void* handle)>;

  RegistrationCache(FindPiece find, Register reg, Deregister dereg);
  // Forgets the pieces without deregistering them (DeregisterAll does that).
  ~RegistrationCache() override = default;

  // Before an operation on [data, data + bytes): registers the piece that holds it if
  // the buffer lies inside one piece that is not registered yet. True if the buffer is
  // inside a registered piece now. A piece the register function refused is not tried
  // again until it has been unmapped.
  bool Prepare(const void* data, size_t bytes);

  // memory::PieceListener: nothing to do when a piece is mapped (pieces are registered
  // when an operation first uses them); deregisters a piece before it is unmapped.
  void OnMapped(const memory::Piece& piece) override {}
  void OnUnmapping(const memory::Piece& piece) override;

  // Deregisters every piece (before the communicator goes).
  void DeregisterAll();

  RegistrationStats stats() const;

 private:
  struct Entry {
    size_t size = 0;
    void* handle = nullptr;
  };
  // Deregisters the entry at `start` if there is one. Needs mu_.
  void DropLocked(uintptr_t start);

  const FindPiece find_;
  const Register register_;
  const Deregister deregister_;
  mutable std::mutex mu_;
  absl::flat_hash_map<uintptr_t, Entry> registered_;  // By piece start.
  absl::flat_hash_set<uintptr_t> refused_;            // Pieces Register refused.
  RegistrationStats stats_;
};

}  // namespace genesis::distributed::nccl_backend

#endif  // GENESIS_DISTRIBUTED_NCCL_REGISTRATION_CACHE_H_
