// NCCL communicators for GPU memory, and NCCL's unique id.
//
// Each group has a non-blocking control communicator (NCCL's config.blocking = 0): it
// is created and split by polling it, so joining a group or splitting it fails with
// DeadlineExceeded after the group's timeout instead of waiting for a peer that never
// comes. Operations run on a blocking communicator split from it (one ncclCommSplit when
// the group is made, the control communicator's connections are never set up), because
// NCCL hands every call on a non-blocking communicator to a new thread of its own and
// polls it: about 50 us per operation between two GPUs against NCCL's 10. A watchdog
// thread polls every operation in flight (its event and NCCL's asynchronous error); one
// that fails, or has not finished within the group's timeout, aborts both communicators
// (ncclCommAbort stops their kernels), so a dead peer or ranks that called different
// operations become errors, never hangs. What a blocking call can still wait on is the
// host side of an operation that sets up connections (the first operation of a kind
// between two ranks) when a peer died just then, and, under registration's kAuto (below),
// the blocking split of the operations' communicator that makes the registered one,
// right after it, when a peer stops between the two; GroupInfo::nccl_blocking = false
// (GENESIS_NCCL_BLOCKING=0) runs operations on the control communicator itself, which
// bounds those too (and makes no registered communicator), at the per-call cost above.
//
// Operations run on the buffer's stream (the storage's stream), so the pool's stream
// order keeps their memory safe without record_stream.
//
// Buffer registration (GroupInfo::nccl_registration, registration_policy.h): NCCL
// works on registered buffers in place where it would otherwise copy them through its
// own buffers. NCCL's rule is that in one operation every rank's buffers are
// registered or none are, so the group decides per operation, alike on every rank, from
// its policy alone (kAuto, the default: all_gather of 16 to 64 MiB, all_to_all of 4 to
// 64 MiB and each sent or received message of 2 to 64 MiB, where it was measured faster;
// kOn: every
// operation; kOff: none), and then makes it true on every rank:
// - A registered operation runs on a communicator of its own (split from the
//   operations' communicator with shared resources under kAuto, that communicator
//   itself under kOn), so every other operation runs where nothing is registered and
//   NCCL finds no registration for it on one rank and not on another. A batch of sends
//   and receives that mixes registered and other messages issues the registered ones
//   as one NCCL group there, then the others as another, in that order on every rank.
// - Its buffers that lie inside one piece of the device pool's expandable segments
//   (one cuMemCreate allocation: NCCL 2.28 registers a range correctly only inside one,
//   and ignores cudaMalloc memory) get that whole piece registered, once per
//   communicator (registration_cache.h); the pool deregisters a piece through every
//   communicator before it unmaps it.
// - Its other buffers (across pieces, in classic segments, from elsewhere, or every
//   buffer where the pool's memory is not exportable as POSIX file descriptors) are
//   copied through a staging area of the communicator's own (ncclMemAlloc, registered):
//   in before the operation and out after it, on its stream (staging_plan.h). That
//   costs a copy on that rank only; the area grows to the largest need and stays until
//   the group goes.
// Captured operations run unregistered (NCCL registers captured buffers itself), and
// so do operations whose buffers all lie in symmetric windows (registered with the
// operations' communicator, where NCCL's symmetric kernels serve them), all operations
// of an interop group (the other client registers nothing) and,
// under kAuto, of a group whose operations run on the non-blocking communicator
// (nccl_blocking off: the registered communicator shares the blocking one's resources).
// BufferRegistration counts registrations and staged buffers. The first operation on
// a newly registered piece costs NCCL tens of milliseconds, later ones microseconds.
//
// One-shot collectives (GroupInfo::nccl_one_shot_bytes, one_shot_plan.h): an
// all_reduce, reduce, broadcast, all_gather, reduce_scatter or all_to_all in which a
// rank sends each peer up to 1 / (ranks - 1) of that many bytes (its piece: the buffer,
// or one rank's part of the gathered or scattered buffer; ranks / 2 of that for
// all_reduce and broadcast, in two steps beyond 2 ranks, 2 / ranks of it for reduce;
// of a dtype and reduction NCCL has), and each send or receive of up to that many (and
// 1 MiB), runs a kernel of genesis's own instead of NCCL's. Each
// thread writes its part straight into every peer's copy of a symmetric window of the
// group (ncclMemAlloc, ncclCommWindowRegister; made when the group is made) over NVLink,
// in NCCL's LL format (a flag beside every 4 bytes of data; larger pieces in bulk, one
// flag per block), and polls its own copy for the peers' parts; reductions run in rank order, so
// every rank gets the same bits (NCCL's order differs: floating sums may differ from NCCL's in the
// last bits). A send waits until its peer took the message two before it (two slots per pair). It
// costs one kernel launch on the host where NCCL's call takes about ten microseconds, and serves
// any buffer, window storage or not. It needs every rank to reach every other's window (one node,
// NVLink or PCIe peer access: NCCL's symmetric memory support), 2 to kOneShotMaxRanks ranks,
// NCCL 2.28 (the kernel reads NCCL's window through NCCL 2.28's device header), operations on the
// blocking communicator and a group that is not an interop one; where any is missing, every rank of
// the group finds the same (the ranks agree when the group is made) and NCCL runs every operation;
// OneShot() says why. Its operations keep to their order across streams as NCCL's do (one waits for
// the one before it on another stream); a captured one records no such order, so a replayed graph's
// must not overlap the group's other one-shot operations. The watchdog treats them as any other: a
// peer that never arrives turns into the group's timeout, and the group's failure tells the kernel
// to stop waiting (a flag in mapped host memory that it reads while it waits).
//
// The copy engines' all_reduce (GroupInfo::nccl_copy_engine_bytes, off by default;
// copy_engine_all_reduce.h): an all_reduce summing float16, bfloat16, float32 or float64
// of at least that many bytes, not captured, moves its bytes with cudaMemcpyAsync
// between the ranks' copies of a symmetric window of the group (pieces of 16 MiB, two
// slots per rank) and adds them with a kernel of genesis's own, so NCCL's kernels hold
// no SMs while it runs; flags in the window, set and awaited by stream memory
// operations, order the ranks. Every rank gets the same bits (each chunk is summed by one
// rank, in rank order). It needs what the one-shot path needs (one node, NCCL 2.28's
// symmetric memory, 2 to 8 ranks, the blocking communicator, no interop); where any is
// missing every rank finds the same and NCCL runs every all_reduce; CopyEngine() says
// why. A captured all_reduce runs NCCL's. The group's failure lets its waits pass, so a
// dead peer turns into the group's timeout as with NCCL's operations.
//
// In a build without CUDA or NCCL every function fails with FailedPrecondition.
#ifndef GENESIS_DISTRIBUTED_NCCL_NCCL_COMMUNICATOR_H_
#define GENESIS_DISTRIBUTED_NCCL_NCCL_COMMUNICATOR_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "genesis/distributed/communicator.h"
#include "genesis/distributed/nccl/copy_engine_plan.h"
#include "genesis/distributed/nccl/one_shot_plan.h"
#include "genesis/distributed/nccl/registration_cache.h"

namespace genesis::distributed::nccl_backend {

// The size of ncclUniqueId.
inline constexpr size_t kUniqueIdBytes = 128;

// A new unique id (ncclGetUniqueId; with NCCL_COMM_ID=host:port set, the same id on
// every rank, rank 0 then serving NCCL's bootstrap on that address).
absl::StatusOr<std::vector<char>> NewUniqueId();

// Creates rank `info.rank` of `info.size` on GPU `info.device` from `unique_id`
// (kUniqueIdBytes bytes, the same on every rank). Blocks until every rank has joined
// or `info.timeout` has passed (then DeadlineExceeded, naming the group).
absl::StatusOr<std::unique_ptr<Communicator>> ConnectNccl(GroupInfo info,
                                                          absl::Span<const char> unique_id);

// "2.28.3", the NCCL library this process runs with; the reason if there is none.
absl::StatusOr<std::string> NcclVersion();

// The file the NCCL this process runs with was loaded from ("" if unknown).
std::string NcclLibrary();

// OK unless GENESIS_NCCL_LIBRARY names an NCCL library other than the one this process
// loaded: InvalidArgument when that file cannot be found, FailedPrecondition (naming
// both files and the directory to put first in LD_LIBRARY_PATH) when it is another
// file. ConnectNccl checks it before anything connects.
absl::Status CheckRequestedLibrary();

// The buffer registration counters of an NCCL communicator (enabled false when
// registration is off for it). InvalidArgument for a communicator of another backend.
absl::StatusOr<RegistrationStats> BufferRegistration(const Communicator& communicator);

// The one-shot collectives of an NCCL communicator: on or off and why, their operations.
// InvalidArgument for a communicator of another backend.
absl::StatusOr<OneShotStats> OneShot(const Communicator& communicator);

// The copy engines' all_reduce of an NCCL communicator: on or off and why, from which
// size, its all_reduces. InvalidArgument for a communicator of another backend.
absl::StatusOr<CopyEngineStats> CopyEngine(const Communicator& communicator);

}  // namespace genesis::distributed::nccl_backend

#endif  // GENESIS_DISTRIBUTED_NCCL_NCCL_COMMUNICATOR_H_
