// Where this process sits in a distributed job, read from its launcher's environment,
// and what tells this launch from every other one.
//
// Launchers and the variables read (the first that applies wins):
//   torchrun   RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
//              TORCHELASTIC_RUN_ID, TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_ERROR_FILE.
//              A C++ binary runs under it with `torchrun --no-python ... ./binary`.
//              Under srun (`srun torchrun ...`) Slurm's variables describe the agents
//              and are ignored.
//   mpirun     Open MPI's OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK / _LOCAL_SIZE and its
//              job id (OMPI_MCA_ess_base_jobid); MASTER_ADDR / MASTER_PORT if set.
//   env://     RANK and WORLD_SIZE set by hand (or by another launcher), as torchrun sets
//              them: read like torchrun's.
//   srun       SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NTASKS_PER_NODE,
//              SLURM_JOB_ID, SLURM_STEP_ID, SLURM_RESTART_COUNT; MASTER_ADDR / MASTER_PORT
//              if set.
// MASTER_ADDR may be left out when every rank runs on this host (127.0.0.1 then); where
// mpirun or srun leave MASTER_PORT out, it is derived from the job id (so that two jobs
// on one node do not meet), or 29500 without one.
//
// The job key: every rank of one launch gets the same key and no other launch does,
// so rendezvous points (NCCL's bootstrap, the Gloo file store) are private to the job:
// GENESIS_RUN_ID if set; else the launcher's job id (Slurm's job and step, Open MPI's
// job id, torchrun's run id with its restart count); torchrun's default run id ("none")
// on one host is replaced by the agent's private directory (from
// TORCHELASTIC_ERROR_FILE), which differs at every launch and restart.
//
//   GENESIS_ASSIGN_OR_RETURN(LaunchEnv env, ReadLaunchEnv());
//   Device gpu = Device::Cuda(env.local_rank);
#ifndef GENESIS_DISTRIBUTED_LAUNCH_ENV_H_
#define GENESIS_DISTRIBUTED_LAUNCH_ENV_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace genesis::distributed {

struct LaunchEnv {
  // "torchrun", "mpirun", "env" (RANK and WORLD_SIZE without torchrun) or "slurm".
  std::string launcher;
  int rank = 0;
  int world_size = 1;
  // Rank among the processes of this host; picks the GPU.
  int local_rank = 0;
  int local_world_size = 1;
  // The host and port of rank 0's rendezvous (torchrun's own store listens on
  // master_port; NCCL's bootstrap uses master_port + 1 unless told otherwise).
  std::string master_addr;
  int master_port = 0;
  // The launcher's own id of the job ("" if it gives none): torchrun's
  // TORCHELASTIC_RUN_ID, Slurm's "job.step", Open MPI's job id.
  std::string run_id;
  // Tells this launch's rendezvous from any other's (see the top of this file); never
  // empty. Made of [A-Za-z0-9._-] only, at most 96 characters.
  std::string job_key;
  // False where job_key may repeat from one launch to the next (torchrun's "none" on
  // several hosts, RANK and WORLD_SIZE set by hand): nothing then tells an earlier
  // job's leftovers from this one's, and a job should clean up after itself.
  bool job_key_unique = false;

  // True when every rank runs on this host.
  bool single_host() const { return local_world_size == world_size; }
};

// Looks a variable up: its value, or nullopt if unset.
using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;

// Looks variables up in this process's environment (getenv).
EnvLookup ProcessEnv();

// Reads the launcher's variables through `lookup`. Errors name the variable and its
// value, before anything connects: NotFound when no launcher's variables are set, or a
// variable a launcher needs is missing; InvalidArgument for a value that is not a
// number, a world size below 1, a rank outside [0, world size), a local rank outside
// [0, local world size), a port outside [1, 65535], and for variables of two launchers
// that contradict each other (torchrun's beside Open MPI's; RANK or WORLD_SIZE
// different from Open MPI's or Slurm's). LOCAL_RANK and LOCAL_WORLD_SIZE default to
// RANK and WORLD_SIZE (all ranks on one host) when a launcher omits them.
absl::StatusOr<LaunchEnv> ParseLaunchEnv(const EnvLookup& lookup);

// ParseLaunchEnv over this process's environment.
absl::StatusOr<LaunchEnv> ReadLaunchEnv();

// A 64-bit FNV-1a hash of `text`: the same on every host and in every build (for
// values that ranks derive independently, such as NCCL's bootstrap magic).
uint64_t StableHash(std::string_view text);

}  // namespace genesis::distributed

#endif  // GENESIS_DISTRIBUTED_LAUNCH_ENV_H_
