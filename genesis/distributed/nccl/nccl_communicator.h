// NCCL communicators for GPU memory, and NCCL's unique id.
//
// Communicators are non-blocking by default (NCCL's config.blocking = 0): no call waits
// for a peer, and a watchdog thread polls every operation in flight (its event and
// NCCL's asynchronous error). An operation that fails, or has not finished within the
// group's timeout, aborts the communicator (ncclCommAbort stops its kernels), so a dead
// peer or ranks that called different operations become errors, never hangs.
// GroupInfo::nccl_blocking makes them blocking, as PyTorch's are by default: grouped
// point-to-point calls (send/recv, all_to_all) then skip the hand-off to NCCL's own
// thread that non-blocking groups pay on every call, and the watchdog still aborts
// operations that do not finish; only a call that blocks while issuing it (connecting to
// a peer that died before the first transfer) is then not bounded by the timeout.
//
// Operations run on the buffer's stream (the storage's stream), so the pool's stream
// order keeps their memory safe without record_stream.
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

}  // namespace genesis::distributed::nccl_backend

#endif  // GENESIS_DISTRIBUTED_NCCL_NCCL_COMMUNICATOR_H_
