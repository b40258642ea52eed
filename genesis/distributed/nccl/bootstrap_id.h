// The NCCL unique id of a job's world group, made from the launcher's environment alone.
//
// With NCCL_COMM_ID=host:port set, ncclGetUniqueId returns the same id on every rank
// (rank 0 serves NCCL's bootstrap on that address), but its bootstrap magic is NCCL's
// fixed constant, so the bootstrap root accepts any process that connects to the
// address: a rank of an earlier or concurrent job on the same port joins this one.
// NCCL drops connections whose magic differs from its own (socketFinalizeAccept), so
// giving every job its own magic, derived from the job key (launch_env.h), keeps jobs
// apart. The id's layout (NCCL 2.x, src/include/bootstrap.h): the 64-bit magic, then
// the root's socket address.
//
// Plain C++: no NCCL needed, so the CPU build tests it too.
#ifndef GENESIS_DISTRIBUTED_NCCL_BOOTSTRAP_ID_H_
#define GENESIS_DISTRIBUTED_NCCL_BOOTSTRAP_ID_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace genesis::distributed::nccl_backend {

// NCCL_MAGIC (src/include/comm.h): the magic of every id made with NCCL_COMM_ID set.
inline constexpr uint64_t kNcclFixedMagic = 0x0280028002800280ULL;

// `id` (an ncclUniqueId's 128 bytes, made with NCCL_COMM_ID set) with its bootstrap
// magic replaced by `magic`. FailedPrecondition if `id` does not start with
// kNcclFixedMagic (an NCCL whose id layout this code does not know, or an id made
// without NCCL_COMM_ID); InvalidArgument for an id of another size or a zero magic.
absl::StatusOr<std::vector<char>> WithBootstrapMagic(std::vector<char> id, uint64_t magic);

}  // namespace genesis::distributed::nccl_backend

#endif  // GENESIS_DISTRIBUTED_NCCL_BOOTSTRAP_ID_H_
