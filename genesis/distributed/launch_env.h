// Where this process sits in a distributed job, read from its launcher's environment.
//
// torchrun (and any launcher that follows its env:// convention) sets RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT; Slurm's srun sets
// SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID and SLURM_NTASKS_PER_NODE, and the job
// script gives MASTER_ADDR (MASTER_PORT defaults to 29500). torchrun's variables win
// where both are present (torchrun started by srun). A C++ binary runs under torchrun
// with `torchrun --no-python --nproc_per_node=N ./binary`.
//
//   GENESIS_ASSIGN_OR_RETURN(LaunchEnv env, ReadLaunchEnv());
//   Device gpu = Device::Cuda(env.local_rank);
#ifndef GENESIS_DISTRIBUTED_LAUNCH_ENV_H_
#define GENESIS_DISTRIBUTED_LAUNCH_ENV_H_

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace genesis::distributed {

struct LaunchEnv {
  // "torchrun" or "slurm": which variables were read.
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
  // torchrun's TORCHELASTIC_RUN_ID or Slurm's job and step ids ("" if unset): tells
  // one job's rendezvous files from another's.
  std::string run_id;

  // True when every rank runs on this host.
  bool single_host() const { return local_world_size == world_size; }
};

// Looks a variable up: its value, or nullopt if unset.
using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;

// Looks variables up in this process's environment (getenv).
EnvLookup ProcessEnv();

// Reads the launcher's variables through `lookup`. Errors name the variable and its
// value: NotFound when neither torchrun's RANK/WORLD_SIZE nor Slurm's
// SLURM_PROCID/SLURM_NTASKS are set, or a variable a launcher needs is missing
// (MASTER_ADDR, SLURM_LOCALID, ...); InvalidArgument for a value that is not a number,
// a world size below 1, a rank outside [0, world size), a local rank outside
// [0, local world size), or a port outside [1, 65535]. LOCAL_RANK and LOCAL_WORLD_SIZE
// default to RANK and WORLD_SIZE (all ranks on one host) when a launcher omits them.
absl::StatusOr<LaunchEnv> ParseLaunchEnv(const EnvLookup& lookup);

// ParseLaunchEnv over this process's environment.
absl::StatusOr<LaunchEnv> ReadLaunchEnv();

}  // namespace genesis::distributed

#endif  // GENESIS_DISTRIBUTED_LAUNCH_ENV_H_
