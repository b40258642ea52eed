// Making process groups: from a launcher's environment (torchrun, mpirun, Slurm), or
// explicitly from a rank, a world size and a store or NCCL unique id.
//
//   // Under `torchrun --no-python --nproc_per_node=2 ./train`:
//   GENESIS_ASSIGN_OR_RETURN(auto gpus, ProcessGroupFromEnvironment(Backend::kNccl));
//   GENESIS_ASSIGN_OR_RETURN(auto cpus, ProcessGroupFromEnvironment(Backend::kGloo));
//
// Groups from the environment keep to their own job (launch_env.h's job key): nothing
// of an earlier or concurrent job reaches them.
//  - NCCL: the world bootstraps through NCCL itself. Rank 0 serves NCCL's bootstrap
//    root at MASTER_ADDR:(MASTER_PORT + 1) (GENESIS_NCCL_PORT overrides the port; an
//    NCCL_COMM_ID the user set is kept); torchrun's own store keeps MASTER_PORT. The
//    id's bootstrap magic is derived from the job key (nccl/bootstrap_id.h), so the
//    root turns away ranks of other jobs. NCCL_COMM_ID is set only while the world
//    group is made. The GPU is cuda:LOCAL_RANK. Before anything connects: MASTER_ADDR
//    must resolve, rank 0 must be able to listen on the root's port, and LOCAL_RANK
//    must name a visible GPU; each failure names the variable.
//  - Gloo: the ranks meet in a file store in <GENESIS_STORE_DIR or /tmp>/
//    genesis-rendezvous-<job key>-<MASTER_ADDR>-<MASTER_PORT> (ranks on several hosts
//    need GENESIS_STORE_DIR on a shared file system). The ranks are its members
//    (Store::File's `shared`): the first finding none alive clears what an earlier job
//    with the same key left, and the last to destroy its world group removes it.
// GENESIS_DISTRIBUTED_TIMEOUT (seconds) overrides GroupOptions::timeout,
// GENESIS_NCCL_BLOCKING=0|1 nccl_blocking, GENESIS_NCCL_REGISTER=0|1|auto
// nccl_registration, GENESIS_NCCL_ONE_SHOT_BYTES nccl_one_shot_bytes and
// GENESIS_NCCL_COPY_ENGINE_BYTES nccl_copy_engine_bytes. A group that
// cannot form fails on every rank within the timeout, naming what it waited for (the
// ranks missing from the store, or the NCCL bootstrap root's address).
//
// An engine that has its own channel (or runs beside PyTorch) makes the NCCL id itself
// (NewNcclUniqueId on rank 0), hands the bytes to every rank, and calls
// CreateNcclGroup(rank, size, device, id).
#ifndef GENESIS_DISTRIBUTED_PROCESS_GROUP_FACTORY_H_
#define GENESIS_DISTRIBUTED_PROCESS_GROUP_FACTORY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "genesis/core/device.h"
#include "genesis/distributed/launch_env.h"
#include "genesis/distributed/nccl/copy_engine_plan.h"
#include "genesis/distributed/nccl/one_shot_plan.h"
#include "genesis/distributed/nccl/registration_cache.h"
#include "genesis/distributed/process_group.h"
#include "genesis/distributed/store.h"

namespace genesis::distributed {

enum class Backend { kGloo, kNccl };

struct GroupOptions {
  // Names the group in errors and keys its rendezvous in a store.
  std::string name = "world";
  // An operation (or the group's creation) not finished after this long fails, and
  // the group is then unusable.
  absl::Duration timeout = absl::Minutes(10);
  // NCCL: operations run on a blocking communicator (creating and splitting groups stay
  // bounded by the timeout either way). Off, every call is bounded too, at about 50 us
  // more per operation across ranks (nccl/nccl_communicator.h).
  // GENESIS_NCCL_BLOCKING=0|1 sets it from the environment.
  bool nccl_blocking = true;
  // NCCL: which operations run on buffers registered with NCCL, which then works on
  // them in place instead of copying them through its own buffers
  // (registration_policy.h). kAuto: all_gather from 16 MiB, where it was measured
  // faster; kOn: every operation; kOff: none. Every rank must choose the same (as for
  // every option here); the ranks' buffers of an operation are then registered alike
  // wherever their pools placed them (nccl/nccl_communicator.h says how).
  // GENESIS_NCCL_REGISTER=0|1|off|on|auto sets it from the environment.
  NcclRegistration nccl_registration = NcclRegistration::kAuto;
  // NCCL: the group's other ranks may belong to another NCCL client (PyTorch, CuPy)
  // that made the unique id. Then each rank makes exactly one communicator, as that
  // client does, and operations run on the non-blocking one (bounded by the timeout,
  // at a few microseconds more per operation). Both sides must load the same NCCL
  // version (NCCL refuses a mismatch at once); `genesis info` shows which NCCL this
  // process loaded.
  bool nccl_interop = false;
  // NCCL: all_reduce, reduce, broadcast, all_gather, reduce_scatter, all_to_all and
  // sends and receives in which a rank sends up to this many bytes (at most 4 MiB; a
  // collective sends its piece to each of the ranks - 1 peers, communicator.h) run
  // genesis's one-shot kernel where the group's GPUs reach each other's memory (one
  // node, NVLink or PCIe peer access, NCCL 2.28's symmetric memory, 2 to 8 ranks,
  // operations on the blocking communicator): each rank writes its part straight into
  // every peer's memory, one kernel launch where NCCL's call alone takes about ten
  // microseconds on the host (nccl/nccl_communicator.h). 0: NCCL runs every operation. Every rank
  // must choose the same (ranks that differ are refused when the group is made).
  // GENESIS_NCCL_ONE_SHOT_BYTES=<bytes> sets it from the environment.
  size_t nccl_one_shot_bytes = kDefaultNcclOneShotBytes;
  // NCCL: all_reduces (sums of floating types) of at least this many bytes run through
  // the GPUs' copy engines instead of NCCL's kernels (communicator.h), under the
  // one-shot path's conditions; 0 (the default): none. Every rank must choose the same.
  // GENESIS_NCCL_COPY_ENGINE_BYTES=<bytes> sets it from the environment.
  size_t nccl_copy_engine_bytes = 0;
  // Gloo: the address this rank listens on. Empty: 127.0.0.1 when every rank is on
  // one host (or for explicit groups), else this host's name.
  std::string gloo_hostname;
};

// A Gloo group (CPU storages) of `size` ranks meeting through `store`. InvalidArgument
// for a size below 1 or a rank outside [0, size); DeadlineExceeded if the other ranks
// do not join within the timeout.
absl::StatusOr<std::unique_ptr<ProcessGroup>> CreateGlooGroup(
    int rank, int size, std::shared_ptr<Store> store, const GroupOptions& options = {});

// A new NCCL unique id (on one rank; hand its bytes to the others).
// FailedPrecondition in a build without NCCL.
absl::StatusOr<std::vector<char>> NewNcclUniqueId();

// An NCCL group on GPU `device` from the unique id every rank was given.
absl::StatusOr<std::unique_ptr<ProcessGroup>> CreateNcclGroup(
    int rank, int size, Device device, absl::Span<const char> unique_id,
    const GroupOptions& options = {});

// The same, rank 0 making the id and the others reading it from `store`.
absl::StatusOr<std::unique_ptr<ProcessGroup>> CreateNcclGroup(
    int rank, int size, Device device, Store& store, const GroupOptions& options = {});

// The buffer registration counters of an NCCL group (hits, misses, registered bytes:
// nccl/registration_cache.h). InvalidArgument for a Gloo group; FailedPrecondition in a
// build without NCCL.
absl::StatusOr<nccl_backend::RegistrationStats> NcclBufferRegistration(ProcessGroup& group);

// What an NCCL group's one-shot collectives do: whether they are on, up to which size,
// how many operations they ran, or why they are off (nccl/one_shot_plan.h's OneShotStats).
// InvalidArgument for a Gloo group; FailedPrecondition in a build without NCCL.
absl::StatusOr<nccl_backend::OneShotStats> NcclOneShot(ProcessGroup& group);

// What an NCCL group's copy engines' all_reduce does: whether it is on, from which size,
// how many all_reduces it ran, or why it is off (nccl/copy_engine_plan.h's
// CopyEngineStats). InvalidArgument for a Gloo group; FailedPrecondition in a build
// without NCCL.
absl::StatusOr<nccl_backend::CopyEngineStats> NcclCopyEngine(ProcessGroup& group);

// The world group of a job started by torchrun, mpirun or Slurm (launch_env.h), for
// `backend`.
absl::StatusOr<std::unique_ptr<ProcessGroup>> ProcessGroupFromEnvironment(
    Backend backend, const GroupOptions& options = {});

// The same from a parsed environment and a variable lookup (for tests).
absl::StatusOr<std::unique_ptr<ProcessGroup>> ProcessGroupFromEnvironment(
    Backend backend, const LaunchEnv& env, const EnvLookup& lookup,
    const GroupOptions& options = {});

}  // namespace genesis::distributed

#endif  // GENESIS_DISTRIBUTED_PROCESS_GROUP_FACTORY_H_
