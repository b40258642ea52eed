// The copy engines' all_reduce (copy_engine_all_reduce.h): how a buffer is cut into
// pieces and chunks, where each chunk lands in a rank's window, and the flags that order
// the ranks' copies and additions. Plain C++, so that the plan is tested without a GPU.
//
// The all_reduce runs piece by piece (pieces of up to CopyEngineLayout::piece() bytes,
// numbered from 1 across every all_reduce of the group, so that a number says which of
// the window's two slots a piece uses and what a flag waits for). Each piece is cut into
// one chunk per rank; rank q sums chunk q of every rank. For piece n, rank r:
//   1. pushes its chunk q to every peer q, through the copy engines, into q's slot
//      (n % 2, from r), then sets q's flag kArrived[r] to n;
//   2. waits until kArrived[p] >= n for every peer p, adds the ranks' chunks r in rank
//      order into its own buffer and into its own slot (n % 2, r), then sets every peer
//      p's kReduced[r] to n;
//   3. waits until kReduced[p] >= n for each peer p, copies p's slot (n % 2, p), the sum
//      of chunk p, into its buffer, then sets p's kPulled[r] to n.
// A slot is written again two pieces later: step 1 for piece n waits until the peer
// added piece n - 2 (kReduced[q] >= n - 2), step 2 until every peer copied the sum of
// piece n - 2 (kPulled[p] >= n - 2). Each chunk is summed once, by one rank, so every
// rank gets the same bits. Flags compare cyclically (cuStreamWaitValue32's GEQ is
// (int32_t)(flag - n) >= 0), so the numbers may wrap.
#ifndef GENESIS_DISTRIBUTED_NCCL_COPY_ENGINE_PLAN_H_
#define GENESIS_DISTRIBUTED_NCCL_COPY_ENGINE_PLAN_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "genesis/core/dtype.h"
#include "genesis/distributed/reduce_op.h"

namespace genesis::distributed::nccl_backend {

inline constexpr int kCopyEngineMaxRanks = 8;

// A group's pieces: 16 MiB (of 4, 16 and 25 MiB on two H200s, 16 and 25 MiB moved 100 MiB
// fastest; docs/distributed.md, "Copy engines").
inline constexpr size_t kCopyEnginePiece = size_t{16} << 20;

// Chunks start at multiples of this many bytes of the buffer (and of a slot).
inline constexpr size_t kCopyEngineAlignment = 256;

// The flags of a window, one 32-bit word per rank and kind.
enum class CopyEngineFlag { kArrived = 0, kReduced = 1, kPulled = 2 };

// Where a piece's chunk lies: `bytes` at `offset` of the buffer (0 bytes for a rank
// that has no part of a short piece).
struct CopyEngineChunk {
  size_t offset = 0;
  size_t bytes = 0;
};

// The window of one rank: two slots for every rank's chunk, then the flags.
class CopyEngineLayout {
 public:
  // For `ranks` ranks (2 to kCopyEngineMaxRanks) and pieces of up to `piece` bytes,
  // rounded down to a multiple of ranks x kCopyEngineAlignment. InvalidArgument for a
  // count of ranks out of range or a piece smaller than that multiple.
  static absl::StatusOr<CopyEngineLayout> Create(int ranks, size_t piece);

  int ranks() const { return ranks_; }
  size_t piece() const { return piece_; }
  size_t chunk() const { return piece_ / ranks_; }

  // Bytes of the window: the slots, then the flags (kCopyEngineAlignment of them).
  size_t bytes() const { return FlagsOffset() + kCopyEngineAlignment; }

  // The offset in the window of the slot piece `number` of chunks from rank `from` uses.
  size_t SlotOffset(uint32_t number, int from) const {
    return ((number % 2) * ranks_ + from) * chunk();
  }

  // The offset in the window of `flag` of rank `from`.
  size_t FlagOffset(CopyEngineFlag flag, int from) const {
    return FlagsOffset() + (static_cast<size_t>(flag) * kCopyEngineMaxRanks + from) * 4;
  }
  size_t FlagsOffset() const { return 2 * piece_; }

  // The number of pieces of an all_reduce of `bytes` bytes (0 for 0 bytes).
  size_t Pieces(size_t bytes) const { return (bytes + piece_ - 1) / piece_; }

  // Chunk `rank` of piece `k` (from 0) of a buffer of `bytes` bytes: the piece cut into
  // ranks() parts of whole multiples of kCopyEngineAlignment, the last parts shorter or
  // empty, each at most chunk() bytes. `bytes` must be a whole number of elements of at
  // most kCopyEngineAlignment bytes; chunks then hold whole elements.
  CopyEngineChunk ChunkOf(size_t bytes, size_t k, int rank) const;

 private:
  CopyEngineLayout(int ranks, size_t piece) : ranks_(ranks), piece_(piece) {}

  int ranks_;
  size_t piece_;
};

// What a group's copy engines' all_reduce does (nccl_communicator.h's CopyEngine).
struct CopyEngineStats {
  bool enabled = false;
  size_t min_bytes = 0;     // GroupInfo::nccl_copy_engine_bytes.
  size_t piece = 0;         // CopyEngineLayout::piece.
  int64_t operations = 0;   // All_reduces it ran so far.
  std::string unavailable;  // Why it is not enabled.

  // "on from 16777216 bytes (pieces of 16777216): 3 all_reduces", or "off: <why>".
  std::string ToString() const;
};

// Whether the copy engines' all_reduce sums `dtype` with `op`: kSum of float16,
// bfloat16, float32 and float64 (gradients); NCCL serves the rest.
bool CopyEngineReduces(DType dtype, ReduceOp op);

}  // namespace genesis::distributed::nccl_backend

#endif  // GENESIS_DISTRIBUTED_NCCL_COPY_ENGINE_PLAN_H_
