// The one-shot all_reduce of small messages (one_shot_kernel.h): which operations it
// serves and where it keeps its state in the symmetric window of its communicator.
// Plain C++, tested on the CPU.
//
// Every rank's kernel copies its input into a staging slot of its window, tells its
// peers so through their inboxes, waits for theirs, then reads every rank's slot over
// NVLink and reduces them in rank order (so every rank computes the same bits) into
// its output. Thread block b always handles bytes [b * kOneShotChunkBytes, (b + 1) *
// kOneShotChunkBytes) of a message and keeps its own count of the operations it took
// part in (its epoch): an operation writes slot epoch % 2, so a block never overwrites
// a slot its peers may still read (they read slot e % 2 of operation e before they
// arrive at operation e + 1, which this block waits for before it writes that slot
// again in operation e + 2).
//
// The window: two slots of `max_bytes`, then an inbox of one 32-bit word per block and
// rank (written by that rank), then one epoch per block (this rank's own).
#ifndef GENESIS_DISTRIBUTED_NCCL_ONE_SHOT_PLAN_H_
#define GENESIS_DISTRIBUTED_NCCL_ONE_SHOT_PLAN_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "genesis/core/dtype.h"
#include "genesis/distributed/reduce_op.h"

namespace genesis::distributed::nccl_backend {

// Threads per block, 16 bytes each.
inline constexpr int kOneShotThreads = 512;
// The bytes of a message one block reduces.
inline constexpr size_t kOneShotChunkBytes = size_t{kOneShotThreads} * 16;
// The most ranks a kernel reduces (the GPUs of one NVLink domain of a node).
inline constexpr int kOneShotMaxRanks = 8;
// The most a group may ask for (GroupInfo::nccl_one_shot_bytes): beyond it every rank reads (ranks
// - 1) times the message over NVLink, where NCCL's ring reads it once.
inline constexpr size_t kOneShotMaxBytes = size_t{4} << 20;

class OneShotLayout {
 public:
  // The window of a group of `ranks` (2 to kOneShotMaxRanks) whose messages of up to
  // `max_bytes` (1 to kOneShotMaxBytes, rounded up to whole chunks) take the one-shot
  // path. InvalidArgument naming the value otherwise.
  static absl::StatusOr<OneShotLayout> Create(size_t max_bytes, int ranks);

  // The largest message, a whole number of chunks.
  size_t max_bytes() const { return max_bytes_; }
  int ranks() const { return ranks_; }
  // Blocks of the largest message: one inbox row and one epoch each.
  size_t max_blocks() const { return max_bytes_ / kOneShotChunkBytes; }

  // Blocks of a kernel that reduces `message_bytes` (> 0).
  static size_t Blocks(size_t message_bytes) {
    return (message_bytes + kOneShotChunkBytes - 1) / kOneShotChunkBytes;
  }
  // Where slot 0 or 1 starts.
  size_t slot(int which) const { return static_cast<size_t>(which) * max_bytes_; }
  // Where the inbox word of `block` written by rank `from` is.
  size_t inbox(size_t block, int from) const {
    return 2 * max_bytes_ + (block * ranks_ + from) * sizeof(uint32_t);
  }
  // Where the epoch of `block` is.
  size_t epoch(size_t block) const {
    return 2 * max_bytes_ + (max_blocks() * ranks_ + block) * sizeof(uint32_t);
  }
  // The window's size: NCCL's window alignment (4096 bytes) as a multiple.
  size_t bytes() const;

 private:
  OneShotLayout(size_t max_bytes, int ranks) : max_bytes_(max_bytes), ranks_(ranks) {}

  size_t max_bytes_;
  int ranks_;
};

// What a communicator's one-shot all_reduce does (nccl_communicator.h's OneShot).
struct OneShotStats {
  bool enabled = false;
  size_t max_bytes = 0;     // Messages up to this size take it, when enabled.
  int64_t operations = 0;   // All_reduces it ran so far.
  std::string unavailable;  // Why it is not enabled.

  // "on up to 262144 bytes: 12 operations", or "off: <why>".
  std::string ToString() const;
};

// Whether the kernel reduces `dtype` with `op`: every dtype and reduction NCCL has
// (uint8, int8, int32, int64, float16, bfloat16, float32, float64; kAvg of the
// floating ones, as CheckReduction allows).
bool OneShotReduces(DType dtype, ReduceOp op);

}  // namespace genesis::distributed::nccl_backend

#endif  // GENESIS_DISTRIBUTED_NCCL_ONE_SHOT_PLAN_H_
