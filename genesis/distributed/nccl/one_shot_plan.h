// The one-shot collectives of small messages (one_shot_kernel.h): which operations they
// serve and where they keep their state in the symmetric window of their communicator.
// Plain C++, tested on the CPU.
//
// Every rank's kernel copies what its peers need into a staging slot of its window,
// tells them so through their inboxes, waits for theirs, then reads the peers' slots
// over NVLink: all of them reduced in rank order (all_reduce, reduce, reduce_scatter;
// every rank computes the same bits), the root's (broadcast), or each one copied to its
// place (all_gather). An operation's `piece` is what one rank contributes per rank it
// serves: the buffer for all_reduce, reduce and broadcast, the input for all_gather,
// the output for reduce_scatter. Thread block b handles bytes [b * kOneShotChunkBytes,
// (b + 1) * kOneShotChunkBytes) of the piece and stages them (once per rank, for
// reduce_scatter) in region b of the slot, which no other block touches, and keeps its
// own count of the operations it took part in (its epoch): an operation writes slot
// epoch % 2, so a block never overwrites a slot its peers may still read (they read
// slot e % 2 of operation e before they arrive at operation e + 1, which this block
// waits for before it writes that slot again in operation e + 2; and a peer arrives at
// an operation only once its kernels before it have finished).
//
// The window: two slots of max_blocks() regions of `ranks` chunks each, then an inbox of
// one 32-bit word per block and rank (written by that rank), then one epoch per block
// (this rank's own).
#ifndef GENESIS_DISTRIBUTED_NCCL_ONE_SHOT_PLAN_H_
#define GENESIS_DISTRIBUTED_NCCL_ONE_SHOT_PLAN_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "genesis/core/dtype.h"
#include "genesis/distributed/reduce_op.h"

namespace genesis::distributed::nccl_backend {

// Threads per block, 16 bytes each.
inline constexpr int kOneShotThreads = 512;
// The bytes of a piece one block handles.
inline constexpr size_t kOneShotChunkBytes = size_t{kOneShotThreads} * 16;
// The most ranks a kernel serves (the GPUs of one NVLink domain of a node).
inline constexpr int kOneShotMaxRanks = 8;
// The most a group may ask for (GroupInfo::nccl_one_shot_bytes): beyond it every rank
// reads (ranks - 1) times the message over NVLink, where NCCL's ring reads it once.
inline constexpr size_t kOneShotMaxBytes = size_t{4} << 20;

enum class OneShotKind { kAllReduce, kReduce, kBroadcast, kAllGather, kReduceScatter };

// "all_reduce", "reduce", "broadcast", "all_gather", "reduce_scatter".
std::string_view OneShotKindName(OneShotKind kind);

// Whether `kind` reduces (all_reduce, reduce, reduce_scatter).
constexpr bool OneShotReduces(OneShotKind kind) {
  return kind == OneShotKind::kAllReduce || kind == OneShotKind::kReduce ||
         kind == OneShotKind::kReduceScatter;
}

class OneShotLayout {
 public:
  // The window of a group of `ranks` (2 to kOneShotMaxRanks) whose operations of up to
  // `max_bytes` (1 to kOneShotMaxBytes, rounded up to whole chunks) take the one-shot
  // path. InvalidArgument naming the value otherwise.
  static absl::StatusOr<OneShotLayout> Create(size_t max_bytes, int ranks);

  // The largest buffer of an operation it serves, a whole number of chunks.
  size_t max_bytes() const { return max_bytes_; }
  int ranks() const { return ranks_; }
  // Blocks of the largest piece: one region, one inbox row and one epoch each.
  size_t max_blocks() const { return max_bytes_ / kOneShotChunkBytes; }

  // Whether an operation whose largest buffer (the output of all_gather, the input of
  // reduce_scatter, the buffer of the others) has `largest` bytes takes the path.
  bool Serves(size_t largest) const { return largest != 0 && largest <= max_bytes_; }

  // Blocks of a kernel whose piece has `piece_bytes` (> 0).
  static size_t Blocks(size_t piece_bytes) {
    return (piece_bytes + kOneShotChunkBytes - 1) / kOneShotChunkBytes;
  }
  // Where a block's region starts within a slot: room for a chunk per rank.
  size_t region(size_t block) const { return block * region_bytes(); }
  size_t region_bytes() const { return static_cast<size_t>(ranks_) * kOneShotChunkBytes; }
  // Where slot 0 or 1 starts.
  size_t slot(int which) const { return static_cast<size_t>(which) * slot_bytes(); }
  size_t slot_bytes() const { return max_blocks() * region_bytes(); }
  // Where the inbox word of `block` written by rank `from` is.
  size_t inbox(size_t block, int from) const {
    return 2 * slot_bytes() + (block * ranks_ + from) * sizeof(uint32_t);
  }
  // Where the epoch of `block` is.
  size_t epoch(size_t block) const {
    return 2 * slot_bytes() + (max_blocks() * ranks_ + block) * sizeof(uint32_t);
  }
  // The window's size: NCCL's window alignment (4096 bytes) as a multiple.
  size_t bytes() const;

 private:
  OneShotLayout(size_t max_bytes, int ranks) : max_bytes_(max_bytes), ranks_(ranks) {}

  size_t max_bytes_;
  int ranks_;
};

// What a communicator's one-shot collectives do (nccl_communicator.h's OneShot).
struct OneShotStats {
  bool enabled = false;
  size_t max_bytes = 0;     // Operations whose largest buffer is up to this take it.
  int64_t operations = 0;   // Operations it ran so far.
  std::string unavailable;  // Why it is not enabled.

  // "on up to 262144 bytes: 12 operations", or "off: <why>".
  std::string ToString() const;
};

// Whether the kernels reduce `dtype` with `op`: every dtype and reduction NCCL has
// (uint8, int8, int32, int64, float16, bfloat16, float32, float64; kAvg of the
// floating ones, as CheckReduction allows).
bool OneShotReduces(DType dtype, ReduceOp op);

}  // namespace genesis::distributed::nccl_backend

#endif  // GENESIS_DISTRIBUTED_NCCL_ONE_SHOT_PLAN_H_
