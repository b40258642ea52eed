#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include <nccl_device.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "genesis/core/absl_compat.h"
#include "genesis/distributed/nccl/device_arithmetic.cuh"
#include "genesis/distributed/nccl/one_shot_kernel.h"

namespace genesis::distributed::nccl_backend {
namespace {

// What the kernel needs of OneShotArgs, by value.
struct Params {
  ncclWindow_t window;
  char* local;
  const volatile int* abort;
  const char* in;
  char* out;
  size_t piece;
  size_t slot_bytes;    // The layout's: slot 1 starts there.
  size_t region_bytes;  // The layout's: block b's region starts at b times it.
  size_t epochs;        // The layout's epoch(0).
  // Bulk (OneShotLayout::Bulk): the layout's bulk_slot(0), bulk_slot_bytes(),
  // bulk_region_bytes() and bulk_flag(0, 0).
  size_t bulk_slot;
  size_t bulk_slot_bytes;
  size_t bulk_region_bytes;
  size_t bulk_flags;
  bool bulk;
  // Two steps (OneShotLayout::TwoStep): the shard's bytes and owners, the layout's
  // two_step_slot(0), two_step_slot_bytes(), two_step_region_bytes() and
  // gather_flag(0, 0).
  bool two_step;
  size_t shard;
  int owners;
  size_t two_step_slot;
  size_t two_step_slot_bytes;
  size_t two_step_region_bytes;
  size_t gather_flags;
  int threads;          // Per block: the layout's Threads(piece).
  OneShotKind kind;
  int rank;
  int ranks;
  int root;
  bool aligned;  // Every address the kernel loads from or stores to is on 16 bytes.
};

// Integers add and multiply modulo 2^bits, as NCCL does (in unsigned arithmetic: a
// signed overflow would be undefined).
template <ReduceOp kOp, typename A>
__device__ A Combine(A a, A b) {
  if constexpr (kOp == ReduceOp::kMin) {
    return b < a ? b : a;
  } else if constexpr (kOp == ReduceOp::kMax) {
    return a < b ? b : a;
  } else if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    const U x = static_cast<U>(a), y = static_cast<U>(b);
    return static_cast<A>(kOp == ReduceOp::kProd ? static_cast<U>(x * y) : static_cast<U>(x + y));
  } else if constexpr (kOp == ReduceOp::kProd) {
    return a * b;
  } else {
    return a + b;  // kSum, kAvg.
  }
}

// 16 bytes of a message, as a vector or as elements.
union alignas(16) Pack {
  uint4 vector;
  unsigned char bytes[16];
};

// How many of the 16 bytes at `at` lie before `end`: 16, fewer at the end, 0 past it.
__device__ int BytesBefore(size_t end, size_t at) {
  return at < end ? static_cast<int>(end - at < 16 ? end - at : 16) : 0;
}

template <typename T>
__device__ void LoadPart(Pack& to, const char* from, int valid, bool aligned) {
  if (aligned && valid == 16) {
    to.vector = *reinterpret_cast<const uint4*>(from);
    return;
  }
  for (int i = 0; i < valid; i += static_cast<int>(sizeof(T))) {
    *reinterpret_cast<T*>(to.bytes + i) = *reinterpret_cast<const T*>(from + i);
  }
}

template <typename T>
__device__ void StorePart(char* to, const Pack& from, int valid, bool aligned) {
  if (aligned && valid == 16) {
    *reinterpret_cast<uint4*>(to) = from.vector;
    return;
  }
  for (int i = 0; i < valid; i += static_cast<int>(sizeof(T))) {
    *reinterpret_cast<T*>(to + i) = *reinterpret_cast<const T*>(from.bytes + i);
  }
}

template <typename T>
__device__ T Element(const Pack& p, int i) {
  return reinterpret_cast<const T*>(p.bytes)[i];
}

// Every rank's 16 bytes (`got`, in rank order) reduced in rank order.
template <typename T, ReduceOp kOp>
__device__ Pack ReduceRanks(const Params& p, const Pack* got) {
  using A = typename Accumulate<T>::type;
  constexpr int kElements = 16 / sizeof(T);
  A acc[kElements];
#pragma unroll
  for (int i = 0; i < kElements; ++i) acc[i] = Widen(Element<T>(got[0], i));
#pragma unroll
  for (int r = 1; r < kOneShotMaxRanks; ++r) {
    if (r < p.ranks) {
#pragma unroll
      for (int i = 0; i < kElements; ++i) {
        acc[i] = Combine<kOp>(acc[i], Widen(Element<T>(got[r], i)));
      }
    }
  }
  Pack out;
#pragma unroll
  for (int i = 0; i < kElements; ++i) {
    A v = acc[i];
    if constexpr (kOp == ReduceOp::kAvg) v = v / static_cast<A>(p.ranks);
    reinterpret_cast<T*>(out.bytes)[i] = Narrow<T>(v);
  }
  return out;
}

// Sends 16 bytes to `to` (a peer's window) as two lines of NCCL's LL format: each
// 8-byte half pairs 4 bytes of data with `flag`, and a 16-byte volatile store lands
// whole, so a reader that finds both flags has the data, with no fence between.
__device__ void SendLL(char* to, const Pack& v, uint32_t flag) {
  const auto* w = reinterpret_cast<const uint32_t*>(v.bytes);
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(to), "r"(w[0]), "r"(flag),
               "r"(w[1]), "r"(flag)
               : "memory");
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(to + 16), "r"(w[2]),
               "r"(flag), "r"(w[3]), "r"(flag)
               : "memory");
}

// Waits for the 16 bytes a peer sent with `flag` to `from` (this rank's window). False
// when the group failed meanwhile (the abort flag, read every 1024 polls).
__device__ bool ReceiveLL(const char* from, Pack& v, uint32_t flag, const volatile int* abort) {
  auto* w = reinterpret_cast<uint32_t*>(v.bytes);
  for (int half = 0; half < 2; ++half) {
    for (uint32_t polls = 1;; ++polls) {
      uint32_t d0, f0, d1, f1;
      asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(d0), "=r"(f0), "=r"(d1), "=r"(f1)
                   : "l"(from + 16 * half)
                   : "memory");
      if (f0 == flag && f1 == flag) {
        w[2 * half] = d0;
        w[2 * half + 1] = d1;
        break;
      }
      if (polls % 1024 == 0 && *abort != 0) return false;
    }
  }
  return true;
}

// 16 bytes stored to (loaded from) memory a peer reads (writes) over NVLink: relaxed at
// system scope, past the L1 cache, as the lines are.
__device__ void StoreShared(char* to, const Pack& v) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(to), "r"(v.vector.x),
               "r"(v.vector.y), "r"(v.vector.z), "r"(v.vector.w)
               : "memory");
}
__device__ Pack LoadShared(const char* from) {
  Pack v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.vector.x), "=r"(v.vector.y), "=r"(v.vector.z), "=r"(v.vector.w)
               : "l"(from)
               : "memory");
  return v;
}

// Writes `flag` to a peer's flag word with release semantics at system scope: what this
// block stored before it (ordered by the barrier before) is visible to whoever acquires
// the flag.
__device__ void ReleaseFlag(uint32_t* to, uint32_t flag) {
  asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(to), "r"(flag) : "memory");
}

// Waits until this rank's flag word at `from` holds `flag` or `flag` + 1 (the writer
// may be one operation ahead; any older value, however old, keeps it waiting, and the
// arithmetic wraps), and acquires it. False when the group failed meanwhile.
__device__ bool AcquireFlag(const uint32_t* from, uint32_t flag, const volatile int* abort) {
  for (uint32_t polls = 1;; ++polls) {
    uint32_t seen;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(seen) : "l"(from) : "memory");
    if (seen - flag <= 1) return true;
    if (polls % 1024 == 0 && *abort != 0) return false;
  }
}

// Programmatic dependent launch (sm_90 and later; every launch below asks for it): a
// one-shot kernel may be launched while the kernel before it on its stream still runs,
// which hides its launch's latency. It waits here until that kernel finished and its
// writes are visible, then lets the next one-shot kernel be launched the same way (one
// kernel ahead, no more).
__device__ void AfterTheKernelBefore() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Whether this rank's bulk kernel sends its bytes to `q`, whose kernel then reads them:
// every peer, but broadcast's root alone sends and reduce's root alone receives.
__device__ bool BulkSends(const Params& p, int from, int to) {
  if (p.kind == OneShotKind::kBroadcast) return from == p.root;
  if (p.kind == OneShotKind::kReduce) return to == p.root;
  return true;
}

// Lines: each thread sends its 16 bytes (`mine`, or for reduce_scatter and all_to_all
// the peer's part) to every peer's region of `slot`, also where the peer does not use
// them (broadcast's non-roots, reduce's root), and receives every peer's into `got`.
// False when the group failed meanwhile.
template <typename T>
__device__ bool ExchangeLines(const Params& p, size_t block, int t, uint32_t epoch, uint32_t flag,
                              size_t at, int valid, const Pack& mine, Pack* got) {
  // Rank q's lines from this thread's peer thread: at (q, t) of this block's region.
  const size_t region = (epoch & 1) * p.slot_bytes + block * p.region_bytes;
  const auto line = [&](int q) {
    return region + (static_cast<size_t>(q) * kOneShotThreads + t) * 32;
  };
  for (int q = 0; q < p.ranks; ++q) {
    if (q == p.rank) continue;
    Pack part = mine;
    if (OneShotScatters(p.kind)) LoadPart<T>(part, p.in + q * p.piece + at, valid, p.aligned);
    SendLL(static_cast<char*>(ncclGetLsaPointer(p.window, line(p.rank), q)), part, flag);
  }
#pragma unroll
  for (int q = 0; q < kOneShotMaxRanks; ++q) {
    if (q < p.ranks && q != p.rank && !ReceiveLL(p.local + line(q), got[q], flag, p.abort)) {
      return false;
    }
  }
  return true;
}

// Once every thread of the block got here (its stores before are done), thread q
// releases `flag` as this rank's flag of `block` in peer q's flags at `flags` (when
// `release`) and then waits for q's here (when `acquire`): `release` and `acquire` say
// so for the thread's peer. Every thread of the block calls it; false, for every
// thread, when a wait failed (the group failed meanwhile).
__device__ bool SwapFlags(const Params& p, size_t flags, size_t block, int t, uint32_t flag,
                          bool release, bool acquire) {
  __syncthreads();
  bool ok = true;
  if (t < p.ranks && t != p.rank) {
    if (release) {
      const size_t word = flags + (block * p.ranks + p.rank) * sizeof(uint32_t);
      ReleaseFlag(static_cast<uint32_t*>(ncclGetLsaPointer(p.window, word, t)), flag);
    }
    if (acquire) {
      const size_t from = flags + (block * p.ranks + t) * sizeof(uint32_t);
      ok = AcquireFlag(reinterpret_cast<const uint32_t*>(p.local + from), flag, p.abort);
    }
  }
  return __syncthreads_or(!ok) == 0;
}

// Bulk: the block's threads store their 16 bytes where they are used (BulkSends) in
// each peer's bulk region of `slot`; once the whole block has, thread q releases this
// rank's flag in peer q's window and then waits for q's flag here; once every peer's
// flag is there, each thread loads the 16 bytes it needs into `got`. Every thread of
// the block takes part. False (for every thread) when the group failed meanwhile.
template <typename T>
__device__ bool ExchangeBulk(const Params& p, size_t block, int t, uint32_t epoch, size_t at,
                             int valid, const Pack& mine, Pack* got) {
  const uint32_t flag = epoch + 1;  // 0 too, once the epoch wraps: AcquireFlag tells them apart.
  const size_t region = p.bulk_slot + (epoch & 1) * p.bulk_slot_bytes + block * p.bulk_region_bytes;
  const auto part_of = [&](int q) {
    return region + static_cast<size_t>(q) * kOneShotChunkBytes + static_cast<size_t>(t) * 16;
  };
  if (valid > 0) {
    for (int q = 0; q < p.ranks; ++q) {
      if (q == p.rank || !BulkSends(p, p.rank, q)) continue;
      Pack part = mine;
      if (OneShotScatters(p.kind)) LoadPart<T>(part, p.in + q * p.piece + at, valid, p.aligned);
      StoreShared(static_cast<char*>(ncclGetLsaPointer(p.window, part_of(p.rank), q)), part);
    }
  }
  if (!SwapFlags(p, p.bulk_flags, block, t, flag, true, true)) return false;
  if (valid > 0) {
#pragma unroll
    for (int q = 0; q < kOneShotMaxRanks; ++q) {
      if (q < p.ranks && q != p.rank && BulkSends(p, q, p.rank)) {
        got[q] = LoadShared(p.local + part_of(q));
      }
    }
  }
  return true;
}

// Two steps: the shard rank `rank` owns (all_reduce: its own; broadcast: none at the
// root, shard q at rank q, or q + 1 from the root on), and the rank that owns `shard`.
__device__ int ShardOf(const Params& p, int rank) {
  if (p.kind != OneShotKind::kBroadcast) return rank;
  return rank == p.root ? -1 : rank < p.root ? rank : rank - 1;
}
__device__ int OwnerOf(const Params& p, int shard) {
  return p.kind != OneShotKind::kBroadcast || shard < p.root ? shard : shard + 1;
}

// Whether rank `from` sends rank `to` its shard in the second step of two: an owner
// sends every peer (all_reduce) or every peer but the root (broadcast).
__device__ bool GatherSends(const Params& p, int from, int to) {
  return ShardOf(p, from) >= 0 && (p.kind != OneShotKind::kBroadcast || to != p.root);
}

// Two steps (OneShotLayout::TwoStep), one block: thread t handles the 16 bytes at
// block * kOneShotChunkBytes + 16 t of every shard. First it stores each owner's shard
// in the owner's region (broadcast: at the root alone), and the flags go between every
// pair, as in bulk; then an owner reduces its shard from what every rank sent
// (broadcast: takes the root's), stores it and sends it on; the second step's flags go
// with the bytes. False (for every thread) when the group failed meanwhile.
template <typename T, ReduceOp kOp>
__device__ bool TwoStep(const Params& p, size_t block, int t, uint32_t epoch) {
  const uint32_t flag = epoch + 1;  // As in bulk.
  const size_t within = block * kOneShotChunkBytes + static_cast<size_t>(t) * 16;
  // The bytes of shard j this thread handles (at j * shard + within): 16, fewer at the
  // piece's end, 0 past it or past the shard.
  const auto valid = [&](int j) -> int {
    const size_t at = static_cast<size_t>(j) * p.shard + within;
    return within < p.shard ? BytesBefore(p.piece, at) : 0;
  };
  const size_t region =
      p.two_step_slot + (epoch & 1) * p.two_step_slot_bytes + block * p.two_step_region_bytes;
  // Where rank q's 16 bytes for this thread land in step 0 or 1.
  const auto part_of = [&](int step, int q) {
    return region + static_cast<size_t>(step * p.ranks + q) * kOneShotChunkBytes +
           static_cast<size_t>(t) * 16;
  };
  if (p.kind != OneShotKind::kBroadcast || p.rank == p.root) {
    for (int j = 0; j < p.owners; ++j) {
      const int q = OwnerOf(p, j);
      const int bytes = valid(j);
      if (q == p.rank || bytes <= 0) continue;
      Pack part = {};
      LoadPart<T>(part, p.in + j * p.shard + within, bytes, p.aligned);
      StoreShared(static_cast<char*>(ncclGetLsaPointer(p.window, part_of(0, p.rank), q)), part);
    }
  }
  if (!SwapFlags(p, p.bulk_flags, block, t, flag, true, true)) return false;
  const int mine = ShardOf(p, p.rank);
  const int bytes = mine >= 0 ? valid(mine) : 0;
  if (bytes > 0) {
    const size_t at = mine * p.shard + within;
    Pack result;
    if (p.kind == OneShotKind::kBroadcast) {
      result = LoadShared(p.local + part_of(0, p.root));
    } else {
      Pack got[kOneShotMaxRanks];
#pragma unroll
      for (int q = 0; q < kOneShotMaxRanks; ++q) {
        if (q >= p.ranks) continue;
        if (q == p.rank) {  // Unrolled, so that `got` stays in registers.
          got[q] = {};
          LoadPart<T>(got[q], p.in + at, bytes, p.aligned);
        } else {
          got[q] = LoadShared(p.local + part_of(0, q));
        }
      }
      result = ReduceRanks<T, kOp>(p, got);
    }
    StorePart<T>(p.out + at, result, bytes, p.aligned);
    for (int q = 0; q < p.ranks; ++q) {
      if (q == p.rank || !GatherSends(p, p.rank, q)) continue;
      StoreShared(static_cast<char*>(ncclGetLsaPointer(p.window, part_of(1, p.rank), q)), result);
    }
  }
  if (!SwapFlags(p, p.gather_flags, block, t, flag, GatherSends(p, p.rank, t),
                 GatherSends(p, t, p.rank))) {
    return false;
  }
  for (int j = 0; j < p.owners; ++j) {
    const int q = OwnerOf(p, j);
    const int got = valid(j);
    if (q == p.rank || got <= 0 || !GatherSends(p, q, p.rank)) continue;
    StorePart<T>(p.out + j * p.shard + within, LoadShared(p.local + part_of(1, q)), got, p.aligned);
  }
  return true;
}

// One block: each thread sends its 16 bytes of the piece (reduce_scatter, all_to_all:
// of the peer's part) to every peer's window, in lines or in bulk, receives every
// peer's, and writes what the operation makes of them.
template <typename T, ReduceOp kOp>
__global__ void __launch_bounds__(kOneShotThreads) OneShot(Params p) {
  __shared__ uint32_t epoch_of_block;
  AfterTheKernelBefore();
  const int t = static_cast<int>(threadIdx.x);
  const size_t block = blockIdx.x;
  uint32_t* const epoch_word = reinterpret_cast<uint32_t*>(p.local + p.epochs) + block;
  if (t == 0) epoch_of_block = *epoch_word;
  __syncthreads();
  const uint32_t epoch = epoch_of_block;
  if (p.two_step) {
    if (TwoStep<T, kOp>(p, block, t, epoch) && t == 0) *epoch_word = epoch + 1;
    return;
  }
  // Never 0, the flags of lines never written (the epoch wraps after 2^32 operations).
  const uint32_t flag = epoch + 1 == 0 ? 1 : epoch + 1;
  const size_t at = block * blockDim.x * 16 + static_cast<size_t>(t) * 16;
  const int valid = BytesBefore(p.piece, at);
  Pack mine = {};
  if (valid > 0 && (p.kind != OneShotKind::kBroadcast || p.rank == p.root)) {
    const size_t own = OneShotScatters(p.kind) ? p.rank * p.piece : 0;
    LoadPart<T>(mine, p.in + own + at, valid, p.aligned);
  }
  Pack got[kOneShotMaxRanks];
  // The lines' exchange is per thread; the bulk's takes the whole block.
  const bool exchanged =
      p.bulk ? ExchangeBulk<T>(p, block, t, epoch, at, valid, mine, got)
             : valid <= 0 || ExchangeLines<T>(p, block, t, epoch, flag, at, valid, mine, got);
  if (!exchanged) return;
#pragma unroll
  for (int q = 0; q < kOneShotMaxRanks; ++q) {
    if (q == p.rank) got[q] = mine;  // Unrolled, so that `got` stays in registers.
  }
  if (valid > 0) {
    switch (p.kind) {
      case OneShotKind::kAllReduce:
      case OneShotKind::kReduceScatter:
        StorePart<T>(p.out + at, ReduceRanks<T, kOp>(p, got), valid, p.aligned);
        break;
      case OneShotKind::kReduce:
        if (p.rank == p.root) {
          StorePart<T>(p.out + at, ReduceRanks<T, kOp>(p, got), valid, p.aligned);
        }
        break;
      case OneShotKind::kBroadcast:
        if (p.rank != p.root) StorePart<T>(p.out + at, got[p.root], valid, p.aligned);
        break;
      case OneShotKind::kAllGather:
      case OneShotKind::kAllToAll:
        for (int q = 0; q < p.ranks; ++q) {
          StorePart<T>(p.out + q * p.piece + at, got[q], valid, p.aligned);
        }
        break;
    }
  }
  if (t == 0) *epoch_word = epoch + 1;
}

// Sends and receives: what the kernel needs of OneShotPeerArgs, by value, with the
// layout's offsets of block 0 (block b's: lines b * `block_bytes` further, counts b
// words further; slot 1's lines `slot_bytes` after slot 0's).
struct PeerMessage {
  char* data;
  size_t bytes;
  size_t lines;  // Slot 0 of its lines: in the peer's window for a send, here for a receive.
  size_t count;  // This rank's count of the messages it sent to (took from) the peer.
  size_t taken;  // What the peer took from this rank: here for a send, there for a receive.
  size_t arrived;        // Bulk: the flags of messages from the sender, in the receiver's window.
  unsigned first_block;  // The message's first block in the grid.
  int peer;
  bool send;
  bool bulk;     // OneShotLayout::MessageBulk.
  bool aligned;  // `data` is on 16 bytes.
};

struct PeerParams {
  ncclWindow_t window;
  char* local;
  const volatile int* abort;
  size_t slot_bytes;
  size_t block_bytes;
  int count;
  PeerMessage messages[kOneShotMaxMessages];
};

// Waits until the peer's count at `taken` (in this rank's window, written by the peer)
// reaches `least`, in wrapping arithmetic. False when the group failed meanwhile.
__device__ bool WaitForCount(const volatile uint32_t* taken, uint32_t least,
                             const volatile int* abort) {
  for (uint32_t polls = 1;; ++polls) {
    if (static_cast<int32_t>(*taken - least) >= 0) return true;
    if (polls % 1024 == 0 && *abort != 0) return false;
  }
}

// A block of a message in bulk, sent: two 16-byte parts per thread stored into the
// block's region `region` of the peer's window, then (once the whole block has) the
// flag k + 1 released there. Received: the flag acquired, then each thread's parts
// loaded and stored. The caller waited, for a send, until the slot is free. False (for
// every thread) when the group failed meanwhile.
__device__ bool PeerBulk(const PeerParams& p, const PeerMessage& m, size_t block, int t, uint32_t k,
                         size_t region) {
  __shared__ int arrived;
  const size_t word = block * sizeof(uint32_t);
  const size_t start = block * OneShotLayout::peer_lines_bytes();
  // Part j of this thread: at start + within(j) of the message and within(j) of the region.
  const auto within = [&](int part) {
    return static_cast<size_t>(part) * kOneShotChunkBytes + static_cast<size_t>(t) * 16;
  };
  if (m.send) {
    char* const to = static_cast<char*>(ncclGetLsaPointer(p.window, region, m.peer));
    for (int part = 0; part < 2; ++part) {
      const int valid = BytesBefore(m.bytes, start + within(part));
      if (valid <= 0) break;
      Pack v = {};
      LoadPart<uint8_t>(v, m.data + start + within(part), valid, m.aligned);
      StoreShared(to + within(part), v);
    }
    __syncthreads();
    if (t == 0) {
      ReleaseFlag(static_cast<uint32_t*>(ncclGetLsaPointer(p.window, m.arrived + word, m.peer)),
                  k + 1);
    }
    return true;
  }
  if (t == 0) {
    arrived =
        AcquireFlag(reinterpret_cast<const uint32_t*>(p.local + m.arrived + word), k + 1, p.abort);
  }
  __syncthreads();
  if (!arrived) return false;
  for (int part = 0; part < 2; ++part) {
    const int valid = BytesBefore(m.bytes, start + within(part));
    if (valid <= 0) break;
    StorePart<uint8_t>(m.data + start + within(part), LoadShared(p.local + region + within(part)),
                       valid, m.aligned);
  }
  return true;
}

// One block of one message: a send writes its 16 bytes per thread (in bulk, 32) into
// the peer's window once the peer took the message two before (whose slot this one
// reuses); a receive waits for its lines (in bulk, the block's flag), stores them, and
// then tells the sender it took them.
__global__ void __launch_bounds__(kOneShotThreads) OneShotPeers(PeerParams p) {
  __shared__ uint32_t sequence;
  __shared__ int proceed;
  AfterTheKernelBefore();
  const int t = static_cast<int>(threadIdx.x);
  int i = 0;
  while (i + 1 < p.count && blockIdx.x >= p.messages[i + 1].first_block) ++i;
  const PeerMessage& m = p.messages[i];
  const size_t block = blockIdx.x - m.first_block;
  const size_t at = block * kOneShotChunkBytes + static_cast<size_t>(t) * 16;
  const int valid = m.bulk ? 0 : BytesBefore(m.bytes, at);
  const size_t word = block * sizeof(uint32_t);
  auto* const count = reinterpret_cast<uint32_t*>(p.local + m.count + word);
  if (t == 0) sequence = *count;
  __syncthreads();
  const uint32_t k = sequence;  // This is the k-th message between the two, in this block.
  const uint32_t flag = k + 1 == 0 ? 1 : k + 1;  // Never 0, the flags of lines never written.
  const size_t region = m.lines + (k & 1) * p.slot_bytes + block * p.block_bytes;
  const size_t line = region + static_cast<size_t>(t) * 32;
  if (m.send) {
    if (t == 0) {
      // Message k - 2 used this slot: the peer must have taken k - 1 messages.
      proceed = WaitForCount(reinterpret_cast<const volatile uint32_t*>(p.local + m.taken + word),
                             k - 1, p.abort);
    }
    __syncthreads();
    if (!proceed) return;
    if (m.bulk) {
      PeerBulk(p, m, block, t, k, region);
    } else if (valid > 0) {
      Pack v = {};
      LoadPart<uint8_t>(v, m.data + at, valid, m.aligned);
      SendLL(static_cast<char*>(ncclGetLsaPointer(p.window, line, m.peer)), v, flag);
    }
    if (t == 0) *count = k + 1;
    return;
  }
  bool received = true;
  if (m.bulk) {
    received = PeerBulk(p, m, block, t, k, region);
  } else if (valid > 0) {
    Pack v;
    received = ReceiveLL(p.local + line, v, flag, p.abort);
    if (received) StorePart<uint8_t>(m.data + at, v, valid, m.aligned);
  }
  // Every thread has its lines (their loads are done) before the sender may reuse them.
  if (!__syncthreads_and(received)) return;
  if (t == 0) {
    *static_cast<volatile uint32_t*>(ncclGetLsaPointer(p.window, m.taken + word, m.peer)) = k + 1;
    *count = k + 1;
  }
}

// Queues `kernel(p)` on `stream` in `blocks` blocks of `threads`, allowing programmatic dependent
// launch (AfterTheKernelBefore). Errors show in cudaGetLastError.
template <typename P>
void LaunchEarly(void (*kernel)(P), unsigned blocks, int threads, cudaStream_t stream, const P& p) {
  cudaLaunchAttribute early = {};
  early.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  early.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(threads);
  config.stream = stream;
  config.attrs = &early;
  config.numAttrs = 1;
  (void)cudaLaunchKernelEx(&config, kernel, p);
}

template <typename T, ReduceOp kOp>
void Launch(const Params& p, unsigned blocks, cudaStream_t stream) {
  LaunchEarly(OneShot<T, kOp>, blocks, p.threads, stream, p);
}

template <typename T>
bool LaunchOp(ReduceOp op, const Params& p, unsigned blocks, cudaStream_t stream) {
  switch (op) {
    case ReduceOp::kSum:
      Launch<T, ReduceOp::kSum>(p, blocks, stream);
      return true;
    case ReduceOp::kProd:
      Launch<T, ReduceOp::kProd>(p, blocks, stream);
      return true;
    case ReduceOp::kMin:
      Launch<T, ReduceOp::kMin>(p, blocks, stream);
      return true;
    case ReduceOp::kMax:
      Launch<T, ReduceOp::kMax>(p, blocks, stream);
      return true;
    case ReduceOp::kAvg:
      if constexpr (std::is_integral_v<T>) {
        return false;
      } else {
        Launch<T, ReduceOp::kAvg>(p, blocks, stream);
        return true;
      }
  }
  return false;
}

bool LaunchFor(DType dtype, ReduceOp op, const Params& p, unsigned blocks, cudaStream_t stream) {
  switch (dtype) {
    case DType::kUInt8:
      return LaunchOp<uint8_t>(op, p, blocks, stream);
    case DType::kInt8:
      return LaunchOp<int8_t>(op, p, blocks, stream);
    case DType::kInt32:
      return LaunchOp<int32_t>(op, p, blocks, stream);
    case DType::kInt64:
      return LaunchOp<int64_t>(op, p, blocks, stream);
    case DType::kFloat16:
      return LaunchOp<__half>(op, p, blocks, stream);
    case DType::kBFloat16:
      return LaunchOp<__nv_bfloat16>(op, p, blocks, stream);
    case DType::kFloat32:
      return LaunchOp<float>(op, p, blocks, stream);
    case DType::kFloat64:
      return LaunchOp<double>(op, p, blocks, stream);
    default:
      return false;
  }
}

}  // namespace

absl::Status LaunchOneShot(const OneShotArgs& args, CUstream_st* stream) {
  const OneShotLayout& layout = *args.layout;
  const bool spread = OneShotSpreads(args.kind);
  // What the window holds: a piece in one step, or in two (OneShotLayout::TwoStep).
  const size_t most = std::max(layout.max_piece(), layout.MaxPiece(args.kind));
  if (args.piece == 0 || args.piece > most) {
    return absl::InvalidArgumentError(absl::StrCat("one-shot ", ToAbsl(OneShotKindName(args.kind)),
                                                   " whose piece has ", args.piece, " bytes (1 to ",
                                                   most, ")"));
  }
  if (args.root < 0 || args.root >= layout.ranks()) {
    return absl::InvalidArgumentError(absl::StrCat("one-shot ", ToAbsl(OneShotKindName(args.kind)),
                                                   " from root ", args.root, " of ", layout.ranks(),
                                                   " ranks"));
  }
  Params p;
  p.window = static_cast<ncclWindow_t>(args.window);
  p.local = args.local;
  p.abort = args.abort;
  p.in = static_cast<const char*>(args.in);
  p.out = static_cast<char*>(args.out);
  p.piece = args.piece;
  p.slot_bytes = layout.slot_bytes();
  p.region_bytes = layout.region_bytes();
  p.epochs = layout.epoch(0);
  p.bulk = layout.Bulk(args.piece);
  p.bulk_slot = layout.bulk_slot(0);
  p.bulk_slot_bytes = layout.bulk_slot_bytes();
  p.bulk_region_bytes = layout.bulk_region_bytes();
  p.bulk_flags = layout.bulk_flag(0, 0);
  p.two_step = layout.TwoStep(args.kind, args.piece);
  p.shard = layout.Shard(args.kind, args.piece);
  p.owners = layout.Owners(args.kind);
  p.two_step_slot = layout.two_step_slot(0);
  p.two_step_slot_bytes = layout.two_step_slot_bytes();
  p.two_step_region_bytes = layout.two_step_region_bytes();
  p.gather_flags = layout.gather_flag(0, 0);
  p.kind = args.kind;
  p.rank = args.rank;
  p.ranks = layout.ranks();
  p.root = args.root;
  p.aligned = (reinterpret_cast<uintptr_t>(args.in) | reinterpret_cast<uintptr_t>(args.out) |
               (spread ? args.piece : 0)) %
                  16 ==
              0;
  p.threads = p.two_step ? kOneShotThreads : layout.Threads(args.piece);
  const auto blocks =
      static_cast<unsigned>(OneShotLayout::Blocks(p.two_step ? p.shard : args.piece, p.threads));
  // What only moves bytes runs the byte kernel (any alignment).
  const bool launched =
      OneShotReduces(args.kind)
          ? OneShotReduces(args.dtype, args.op) && LaunchFor(args.dtype, args.op, p, blocks, stream)
          : LaunchOp<uint8_t>(ReduceOp::kSum, p, blocks, stream);
  if (!launched) {
    return absl::InvalidArgumentError(
        absl::StrCat("the one-shot ", ToAbsl(OneShotKindName(args.kind)), " does not reduce ",
                     ToAbsl(DTypeName(args.dtype)), " with ", ToAbsl(ReduceOpName(args.op))));
  }
  const cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) {
    return absl::InternalError(
        absl::StrCat("launching the one-shot ", ToAbsl(OneShotKindName(args.kind)), ": ",
                     cudaGetErrorName(error), ": ", cudaGetErrorString(error)));
  }
  return absl::OkStatus();
}

absl::Status LaunchOneShotPeers(const OneShotPeerArgs& args, CUstream_st* stream) {
  const OneShotLayout& layout = *args.layout;
  if (args.messages.empty() || args.messages.size() > static_cast<size_t>(kOneShotMaxMessages)) {
    return absl::InvalidArgumentError(absl::StrCat("one-shot launch of ", args.messages.size(),
                                                   " sends and receives (1 to ",
                                                   kOneShotMaxMessages, ")"));
  }
  PeerParams p = {};
  p.window = static_cast<ncclWindow_t>(args.window);
  p.local = args.local;
  p.abort = args.abort;
  p.slot_bytes = layout.peer_lines(0, 1, 0) - layout.peer_lines(0, 0, 0);
  p.block_bytes = OneShotLayout::peer_lines_bytes();
  p.count = static_cast<int>(args.messages.size());
  uint32_t sends = 0, receives = 0;  // Bit q: a send to (receive from) q came already.
  size_t blocks = 0;
  for (size_t i = 0; i < args.messages.size(); ++i) {
    const OneShotMessage& m = args.messages[i];
    const char* what = m.send ? "send to" : "receive from";
    if (m.peer < 0 || m.peer >= layout.ranks() || m.peer == args.rank) {
      return absl::InvalidArgumentError(absl::StrCat(
          "one-shot ", what, " rank ", m.peer, " from rank ", args.rank, " of ", layout.ranks()));
    }
    if (!layout.ServesMessage(m.bytes)) {
      return absl::InvalidArgumentError(absl::StrCat("one-shot ", what, " rank ", m.peer, " of ",
                                                     m.bytes, " bytes (1 to ", layout.max_message(),
                                                     ")"));
    }
    uint32_t& seen = m.send ? sends : receives;
    if ((seen >> m.peer) & 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("two one-shot messages ", what, " rank ", m.peer, " in one launch"));
    }
    seen |= uint32_t{1} << m.peer;
    PeerMessage& to = p.messages[i];
    to.data = static_cast<char*>(m.data);
    to.bytes = m.bytes;
    to.lines = layout.peer_lines(m.send ? args.rank : m.peer, 0, 0);
    to.count = m.send ? layout.sent_to(m.peer, 0) : layout.taken_from(m.peer, 0);
    to.taken = layout.taken_by(m.send ? m.peer : args.rank, 0);
    to.arrived = layout.arrived_from(m.send ? args.rank : m.peer, 0);
    to.first_block = static_cast<unsigned>(blocks);
    to.peer = m.peer;
    to.send = m.send;
    to.bulk = OneShotLayout::MessageBulk(m.bytes);
    to.aligned = reinterpret_cast<uintptr_t>(m.data) % 16 == 0;
    blocks += OneShotLayout::MessageBlocks(m.bytes);
  }
  LaunchEarly(OneShotPeers, static_cast<unsigned>(blocks), kOneShotThreads, stream, p);
  const cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) {
    return absl::InternalError(
        absl::StrCat("launching one-shot sends and receives: ", cudaGetErrorName(error), ": ",
                     cudaGetErrorString(error)));
  }
  return absl::OkStatus();
}

absl::StatusOr<WindowRanks> ReadWindowRanks(void* window) {
  cudaPointerAttributes attributes;
  if (window == nullptr || cudaPointerGetAttributes(&attributes, window) != cudaSuccess ||
      attributes.type != cudaMemoryTypeDevice) {
    (void)cudaGetLastError();
    return absl::FailedPreconditionError("NCCL's window is not in device memory");
  }
  // Only the fields every NCCL 2.28 has in common (later releases append theirs).
  constexpr size_t kCommon = offsetof(ncclWindow_vidmem, mcOffset4K) + sizeof(uint32_t);
  ncclWindow_vidmem copy;
  const cudaError_t copied = cudaMemcpy(&copy, window, kCommon, cudaMemcpyDeviceToHost);
  if (copied != cudaSuccess) {
    return absl::InternalError(absl::StrCat("reading NCCL's window: ", cudaGetErrorName(copied)));
  }
  return WindowRanks{copy.lsaRank, copy.worldRank, copy.lsaFlatBase, copy.stride4G};
}

}  // namespace genesis::distributed::nccl_backend
