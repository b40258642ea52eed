// The one-shot collectives (one_shot_kernel.h): which operations they serve and where
// they keep their state in the symmetric window of their communicator. Plain C++, tested
// on the CPU.
//
// Every thread of a rank's kernel sends its 16 bytes of what the operation needs to
// every peer's window, straight into the peer's memory over NVLink, in NCCL's LL format
// (each 8 bytes pair 4 bytes of data with a flag, the operation's epoch + 1, and a
// 16-byte store lands whole, so the reader needs no fence and no barrier: it polls its
// own memory until the flags are there). It then reduces what every rank sent in rank
// order (all_reduce, reduce, reduce_scatter; every rank computes the same bits), takes
// the root's (broadcast) or puts each one in its place (all_gather, all_to_all, whose
// ranks send each peer its own part of their input). An operation's `piece` is what
// one rank contributes per rank it serves: the buffer for all_reduce, reduce and
// broadcast, the input for all_gather, the output for reduce_scatter, one rank's part
// for all_to_all.
// Which operations take the path is a budget of what one rank sends (Create): a
// collective sends its piece to each of the ranks - 1 peers, so its piece may be up to
// budget / (ranks - 1) (for all_reduce and broadcast ranks / 2 of that, in two steps
// beyond 2 ranks; for reduce 2 / ranks of it: MaxPiece), and a send up to the budget
// and kOneShotMaxMessage (docs/distributed.md, "One-shot collectives", has the
// measurements).
// Thread block b of t threads (Threads()) handles bytes [b * 16t, (b + 1) * 16t) of the
// piece, and its lines from rank q land in region b of the slot at q's place.
// Larger pieces (kOneShotLineMaxPiece) go in bulk instead (Bulk()): the bytes
// themselves into the peer's bulk slot, then, once the whole block has stored its
// part, one flag per block and rank (released at system scope after the block's
// stores; the reader acquires it before it reads), so each byte sent is a byte of
// data (lines carry 8 in 16), for a round trip of the flags per block. A bulk
// operation sends its bytes only where they are used (broadcast: from the root;
// reduce: to the root), its flags to every peer. Beyond 2 ranks, large all_reduces and
// broadcasts take two steps (TwoStep): the first as in bulk, to each shard's owner,
// the second from the owners, behind flags of their own.
// Each block keeps its own count of the operations it took part in (its epoch), and
// an operation uses slot epoch % 2 (of the lines, of the bulk or of two steps). Every
// rank sends to every peer (lines, or a flag), so an operation ends on a rank only once
// every peer has started it, that is finished the one before: a rank writes a peer's
// slot again two operations later only after the peer is done reading it. A bulk flag
// holds the epoch + 1 of the last bulk operation: a reader waits until it is its own
// or the next (a peer may be one operation ahead), so a flag written long ago never
// passes for a new one, also once the epoch wraps.
//
// Sends and receives (one_shot_kernel.h's LaunchOneShotPeers) pair two ranks, so they
// keep counts of their own, per peer and block: the k-th message from rank p to rank q
// travels in slot k % 2 of p's lines in q's window, flagged k + 1, and q tells p how
// many it has taken (q writes into p's window after it read them all), so p writes a
// slot again only once q took the message two before: a send waits for the receive two
// messages before it, not for its own. The counts live on the device, as the epochs do.
// A message of more than kOneShotLineMaxPiece goes in bulk (MessageBulk) in the same
// regions, twice the data per block, and p releases its flag k + 1 in q's window
// (arrived_from) once the block has stored it, as the collectives' bulk does.
//
// The window: two slots of line_blocks() regions (a line pair per rank and thread), then
// one epoch per block (this rank's own); two bulk slots of bulk_blocks() regions (16
// bytes per rank and thread), a bulk flag and a second-step flag per block and rank,
// two two-step slots of two_step_blocks() regions (the two steps' 16 bytes per rank and
// thread); then the sends' and receives' lines, two slots per source rank and block,
// and per peer and block the messages that peer took from this rank (written by the
// peer), this rank sent it and this rank took from it, and the flag of its last message
// in bulk (written by it).
#ifndef GENESIS_DISTRIBUTED_NCCL_ONE_SHOT_PLAN_H_
#define GENESIS_DISTRIBUTED_NCCL_ONE_SHOT_PLAN_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "genesis/core/dtype.h"
#include "genesis/distributed/reduce_op.h"

namespace genesis::distributed::nccl_backend {

// Threads per block, 16 bytes each (the layout's regions hold this many).
inline constexpr int kOneShotThreads = 512;
// Threads per block of collectives whose piece has up to kOneShotSmallPiece bytes: more
// blocks, each done sooner (OneShotLayout::Threads).
inline constexpr int kOneShotSmallThreads = 128;
inline constexpr size_t kOneShotSmallPiece = size_t{16} << 10;
// Collectives whose piece has up to this many bytes send it in LL lines, larger ones in
// bulk (OneShotLayout::Bulk); half that beyond 2 ranks, where a rank sends more.
inline constexpr size_t kOneShotLineMaxPiece = size_t{64} << 10;
// What a rank sends in the time a step of flags costs: beyond 2 ranks, all_reduce and
// broadcast take two steps where that sends less (OneShotLayout::TwoStep).
inline constexpr size_t kOneShotStepBytes = size_t{768} << 10;
// Sends and receives of up to this many bytes take the path, at most: in lines up to
// kOneShotLineMaxPiece, in bulk beyond (OneShotLayout::MessageBulk).
inline constexpr size_t kOneShotMaxMessage = size_t{1} << 20;
// The bytes of a piece one block of kOneShotThreads handles.
inline constexpr size_t kOneShotChunkBytes = size_t{kOneShotThreads} * 16;
// The most ranks a kernel serves (the GPUs of one NVLink domain of a node).
inline constexpr int kOneShotMaxRanks = 8;
// The most sends and receives one kernel takes: one to and one from each peer.
inline constexpr int kOneShotMaxMessages = 2 * (kOneShotMaxRanks - 1);
// The most budget a group may ask for (GroupInfo::nccl_one_shot_bytes): the window
// holds two slots of the largest piece per rank.
inline constexpr size_t kOneShotMaxBytes = size_t{4} << 20;

enum class OneShotKind { kAllReduce, kReduce, kBroadcast, kAllGather, kReduceScatter, kAllToAll };

// "all_reduce", "reduce", "broadcast", "all_gather", "reduce_scatter", "all_to_all".
std::string_view OneShotKindName(OneShotKind kind);

// Whether `kind` reduces (all_reduce, reduce, reduce_scatter).
constexpr bool OneShotReduces(OneShotKind kind) {
  return kind == OneShotKind::kAllReduce || kind == OneShotKind::kReduce ||
         kind == OneShotKind::kReduceScatter;
}

// Whether `kind`'s input holds a part for each rank (reduce_scatter, all_to_all): a
// rank sends each peer that peer's part.
constexpr bool OneShotScatters(OneShotKind kind) {
  return kind == OneShotKind::kReduceScatter || kind == OneShotKind::kAllToAll;
}

// Whether `kind`'s output holds a part from each rank (all_gather, all_to_all).
constexpr bool OneShotGathers(OneShotKind kind) {
  return kind == OneShotKind::kAllGather || kind == OneShotKind::kAllToAll;
}

// Whether `kind`'s largest buffer holds a piece per rank (all_gather, reduce_scatter,
// all_to_all), where the others' holds one piece.
constexpr bool OneShotSpreads(OneShotKind kind) {
  return OneShotScatters(kind) || OneShotGathers(kind);
}

class OneShotLayout {
 public:
  // The window of a group of `ranks` (2 to kOneShotMaxRanks) where a rank sends up to
  // `budget` bytes (1 to kOneShotMaxBytes) in one one-shot operation: a collective
  // whose piece has up to budget / (ranks - 1) bytes (every rank sends its piece to
  // each peer; MaxPiece), a send of up to `budget` and kOneShotMaxMessage bytes.
  // InvalidArgument naming the value otherwise.
  static absl::StatusOr<OneShotLayout> Create(size_t budget, int ranks);

  // GroupInfo::nccl_one_shot_bytes: the most a rank sends in one operation.
  size_t budget() const { return budget_; }
  int ranks() const { return ranks_; }
  // The largest piece of a collective the window holds: budget / (ranks - 1).
  size_t max_piece() const { return budget_ / static_cast<size_t>(ranks_ - 1); }
  // The largest piece of a `kind` collective that takes the path. All_gather,
  // reduce_scatter and all_to_all: max_piece() (the kernel sends what NCCL's ring
  // sends). All_reduce and broadcast: ranks / 2 times it: at 2 ranks the kernel sends
  // the peer the buffer, as NCCL's ring all_reduce does; beyond, they take two steps
  // (TwoStep), where a rank sends 2 (ranks - 1) / ranks of the buffer in all, as the
  // ring does (broadcast's ranks less). Reduce, in one step only: 2 / ranks of it (its
  // root receives the buffer from every peer; two steps measured slower than NCCL's
  // reduce, docs/distributed.md, "In two steps").
  size_t MaxPiece(OneShotKind kind) const {
    const auto n = static_cast<size_t>(ranks_);
    if (OneShotSpreads(kind)) return max_piece();
    return kind == OneShotKind::kReduce ? max_piece() * 2 / n : max_piece() * n / 2;
  }
  // Whether a `kind` collective whose piece has `piece` bytes takes the path: the same
  // answer on every rank.
  bool Serves(OneShotKind kind, size_t piece) const {
    return piece != 0 && piece <= MaxPiece(kind);
  }
  // Whether a send or receive of `bytes` takes it (both ends of a message decide alike).
  bool ServesMessage(size_t bytes) const { return bytes != 0 && bytes <= max_message(); }
  // The largest message: the budget, at most kOneShotMaxMessage.
  size_t max_message() const { return std::min(budget_, kOneShotMaxMessage); }
  // The largest buffer of a `kind` collective that takes the path: one piece
  // (all_reduce, reduce, broadcast) or one per rank (all_gather, reduce_scatter,
  // all_to_all).
  size_t MaxLargest(OneShotKind kind) const {
    return OneShotSpreads(kind) ? MaxPiece(kind) * static_cast<size_t>(ranks_) : MaxPiece(kind);
  }
  // Whether a `kind` collective whose piece has `piece` bytes takes two steps: beyond
  // 2 ranks, an all_reduce or broadcast of more than two_step_min_piece() (or than the
  // one-step slots hold, max_piece()). The piece is cut in shards, one per owner
  // (Shard). First every rank sends each owner its shard (broadcast: the root alone),
  // and each owner reduces what it got (broadcast: keeps the root's); then each owner
  // sends its result to every peer (broadcast: but the root). The same on every rank.
  bool TwoStep(OneShotKind kind, size_t piece) const {
    return ranks_ > 2 && (kind == OneShotKind::kAllReduce || kind == OneShotKind::kBroadcast) &&
           piece > std::min(two_step_min_piece(), max_piece());
  }
  // Where two steps send less than one by what a step of flags costs: one step sends
  // (ranks - 1) pieces, two steps 2 (ranks - 1) / ranks, so from kOneShotStepBytes x
  // ranks / ((ranks - 1)(ranks - 2)) on: 512 KiB at 4 ranks (measured, docs/
  // distributed.md, "In two steps"), 1152 KiB at 3 and 146 KiB at 8 (the model's).
  size_t two_step_min_piece() const {
    const auto n = static_cast<size_t>(ranks_);
    return ranks_ > 2 ? kOneShotStepBytes * n / ((n - 1) * (n - 2)) : 0;
  }
  // The shards' owners: every rank for all_reduce; for broadcast every rank but the
  // root, which so sends the buffer once (shard j is rank j's, or j + 1's from the root
  // on).
  int Owners(OneShotKind kind) const {
    return kind == OneShotKind::kBroadcast ? ranks_ - 1 : ranks_;
  }
  // The bytes of each shard of a two-step `kind` whose piece has `piece` bytes, whole
  // 16 bytes (the last shards may be shorter, or empty).
  size_t Shard(OneShotKind kind, size_t piece) const {
    const size_t unit = 16 * static_cast<size_t>(Owners(kind));
    return (piece + unit - 1) / unit * 16;
  }
  // Blocks of the largest piece.
  size_t max_blocks() const { return Blocks(max_piece()); }
  // Blocks of the largest shard of two steps (broadcast's, of kOneShotThreads), 0
  // where none.
  size_t two_step_blocks() const {
    constexpr OneShotKind kBroadcast = OneShotKind::kBroadcast;
    const size_t largest = MaxPiece(kBroadcast);
    return TwoStep(kBroadcast, largest) ? Blocks(Shard(kBroadcast, largest)) : 0;
  }
  // Blocks that keep an epoch: of the largest piece, of lines in small blocks, or of the
  // largest shard.
  size_t epoch_blocks() const { return std::max({max_blocks(), line_blocks(), two_step_blocks()}); }
  // Whether a collective whose piece has `piece` bytes sends it in bulk (else in lines).
  // The same on every rank.
  bool Bulk(size_t piece) const { return piece > line_max_piece(); }
  size_t line_max_piece() const {
    return ranks_ == 2 ? kOneShotLineMaxPiece : kOneShotLineMaxPiece / 2;
  }
  // Blocks of the largest piece sent in lines (in blocks of either size, Threads), and
  // in bulk: one region of each kind each.
  size_t line_blocks() const {
    return std::max(Blocks(std::min(max_piece(), line_max_piece())),
                    Blocks(std::min(max_piece(), kOneShotSmallPiece), kOneShotSmallThreads));
  }
  size_t bulk_blocks() const { return Bulk(max_piece()) ? max_blocks() : 0; }
  // Whether a send or receive of `bytes` goes in bulk (else in lines): the same at both
  // ends. A block of a message in bulk carries peer_lines_bytes() of it (two 16-byte
  // parts per thread), in the region that holds a block's lines (half as much data).
  static bool MessageBulk(size_t bytes) { return bytes > kOneShotLineMaxPiece; }
  // Blocks of a message of `bytes`, of kOneShotThreads each.
  static size_t MessageBlocks(size_t bytes) {
    return MessageBulk(bytes) ? (bytes + peer_lines_bytes() - 1) / peer_lines_bytes()
                              : Blocks(bytes);
  }
  // Blocks of the largest message, in lines or in bulk: two slots of regions per source
  // rank each.
  size_t max_message_blocks() const {
    return std::max(MessageBlocks(std::min(max_message(), kOneShotLineMaxPiece)),
                    MessageBlocks(max_message()));
  }

  // Blocks of a kernel of `threads` threads per block whose piece (message) has
  // `piece_bytes`.
  static size_t Blocks(size_t piece_bytes, int threads = kOneShotThreads) {
    const size_t chunk = static_cast<size_t>(threads) * 16;
    return (piece_bytes + chunk - 1) / chunk;
  }
  // Threads per block of a collective whose piece has `piece_bytes` (> 0):
  // kOneShotSmallThreads up to kOneShotSmallPiece where its blocks fit the layout
  // (block b uses the first threads' lines of region b), else kOneShotThreads. Every
  // rank computes the same from the same size. On four H200s, 100 captured 8 KiB
  // all_reduces took 4.75 us an operation in blocks of 128 threads against 5.49 in one
  // block of 512 (2 ranks: 3.12 against 3.68); at 64 KiB one block per 8 KiB was faster.
  int Threads(size_t piece_bytes) const {
    return piece_bytes <= kOneShotSmallPiece &&
                   Blocks(piece_bytes, kOneShotSmallThreads) <= line_blocks()
               ? kOneShotSmallThreads
               : kOneShotThreads;
  }
  // Where a block's region starts within a slot: two 16-byte lines per rank and thread
  // (each carries 8 bytes of data).
  size_t region(size_t block) const { return block * region_bytes(); }
  size_t region_bytes() const { return static_cast<size_t>(ranks_) * kOneShotThreads * 32; }
  // Where slot 0 or 1 starts.
  size_t slot(int which) const { return static_cast<size_t>(which) * slot_bytes(); }
  size_t slot_bytes() const { return line_blocks() * region_bytes(); }
  // Where the epoch of `block` is.
  size_t epoch(size_t block) const { return 2 * slot_bytes() + block * sizeof(uint32_t); }
  // Bulk: where bulk slot 0 or 1 starts; a block's region in a slot, 16 bytes per rank
  // and thread (rank q's at q * kOneShotChunkBytes); the flag of `block` from `source`.
  size_t bulk_slot(int which) const {
    return bulk_start() + static_cast<size_t>(which) * bulk_slot_bytes();
  }
  size_t bulk_slot_bytes() const { return bulk_blocks() * bulk_region_bytes(); }
  size_t bulk_region_bytes() const { return static_cast<size_t>(ranks_) * kOneShotChunkBytes; }
  size_t bulk_flag(size_t block, int source) const {
    return bulk_slot(2) + (block * static_cast<size_t>(ranks_) + source) * sizeof(uint32_t);
  }
  // Blocks with bulk flags: of bulk pieces and of two-step shards (whose first step
  // uses them).
  size_t flag_blocks() const { return std::max(bulk_blocks(), two_step_blocks()); }
  // Two steps: the flag of the second step of `block` from `source`; where slot 0 or 1
  // starts; a block's region in a slot: the first step's 16 bytes per rank and thread
  // (rank q's at q * kOneShotChunkBytes), then the second's.
  size_t gather_flag(size_t block, int source) const {
    return bulk_flag(flag_blocks(), 0) +
           (block * static_cast<size_t>(ranks_) + source) * sizeof(uint32_t);
  }
  size_t two_step_slot(int which) const {
    return two_step_start() + static_cast<size_t>(which) * two_step_slot_bytes();
  }
  size_t two_step_slot_bytes() const { return two_step_blocks() * two_step_region_bytes(); }
  size_t two_step_region_bytes() const { return 2 * bulk_region_bytes(); }

  // Sends and receives. Where block `block` of a message from rank `source` in slot
  // 0 or 1 lands (a line pair per thread, or in bulk 16 bytes per thread and half).
  size_t peer_lines(int source, int slot, size_t block) const {
    return peer_lines_start() +
           ((static_cast<size_t>(source) * 2 + slot) * max_message_blocks() + block) *
               peer_lines_bytes();
  }
  static constexpr size_t peer_lines_bytes() { return size_t{kOneShotThreads} * 32; }
  // How many messages `peer` took from this rank, block `block` of each (written by
  // the peer); how many this rank sent to it; how many it took from it.
  size_t taken_by(int peer, size_t block) const { return counter(0, peer, block); }
  size_t sent_to(int peer, size_t block) const { return counter(1, peer, block); }
  size_t taken_from(int peer, size_t block) const { return counter(2, peer, block); }
  // The flag of block `block` of the last message in bulk from `source` (written by the
  // source once the block's bytes are here): its count + 1.
  size_t arrived_from(int source, size_t block) const { return counter(3, source, block); }
  // The window's size: NCCL's window alignment (4096 bytes) as a multiple.
  size_t bytes() const;

 private:
  OneShotLayout(size_t budget, int ranks) : budget_(budget), ranks_(ranks) {}

  // After the epochs, on a line's alignment.
  size_t bulk_start() const { return (epoch(epoch_blocks()) + 255) / 256 * 256; }
  // After the bulk and second-step flags, on a line's alignment.
  size_t two_step_start() const { return (gather_flag(flag_blocks(), 0) + 255) / 256 * 256; }
  // After the two-step slots.
  size_t peer_lines_start() const { return two_step_slot(2); }
  // The four kinds of counts (taken by, sent to, taken from, arrived from) after the
  // lines.
  size_t counter(int kind, int peer, size_t block) const {
    const size_t start = peer_lines(ranks_, 0, 0);
    return start + ((static_cast<size_t>(kind) * ranks_ + peer) * max_message_blocks() + block) *
                       sizeof(uint32_t);
  }

  size_t budget_;
  int ranks_;
};

// What a communicator's one-shot collectives do (nccl_communicator.h's OneShot).
struct OneShotStats {
  bool enabled = false;
  size_t budget = 0;        // GroupInfo::nccl_one_shot_bytes (OneShotLayout::budget).
  size_t max_piece = 0;     // The largest piece the window holds (OneShotLayout).
  int64_t operations = 0;   // Operations it ran so far.
  std::string unavailable;  // Why it is not enabled.

  // "on, up to 524288 bytes a rank sends (collectives' pieces up to 174762): 12
  // operations", or "off: <why>".
  std::string ToString() const;
};

// A batch of sends and receives (`send`, `peer` of each, in batch order) as launches of
// at most one send to and one receive from each peer: message i goes in launch
// `round[i]`, the number of messages of its direction and peer before it, so each
// peer's messages keep their order. Returns the number of launches. `round` has the
// batch's size.
struct OneShotPeerKey {
  bool send = true;
  int peer = 0;
};
int OneShotPeerRounds(absl::Span<const OneShotPeerKey> batch, absl::Span<int> round);

// Whether the kernels reduce `dtype` with `op`: every dtype and reduction NCCL has
// (uint8, int8, int32, int64, float16, bfloat16, float32, float64; kAvg of the
// floating ones, as CheckReduction allows).
bool OneShotReduces(DType dtype, ReduceOp op);

}  // namespace genesis::distributed::nccl_backend

#endif  // GENESIS_DISTRIBUTED_NCCL_ONE_SHOT_PLAN_H_
