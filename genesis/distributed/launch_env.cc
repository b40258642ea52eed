#include "genesis/distributed/launch_env.h"

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "genesis/core/absl_compat.h"
#include "genesis/core/status.h"

namespace genesis::distributed {
namespace {

constexpr int kDefaultPort = 29500;
constexpr size_t kMaxKeyLength = 96;

bool IsSet(const EnvLookup& lookup, std::string_view name) {
  std::optional<std::string> value = lookup(name);
  return value.has_value() && !value->empty();
}

absl::StatusOr<std::string> Required(const EnvLookup& lookup, std::string_view name,
                                     std::string_view launcher) {
  std::optional<std::string> value = lookup(name);
  if (!value.has_value() || value->empty()) {
    return absl::NotFoundError(absl::StrCat("environment variable ", ToAbsl(name),
                                            " is not set (needed under ",
                                            ToAbsl(launcher), ")"));
  }
  return *value;
}

absl::StatusOr<int> ToInt(std::string_view name, std::string_view value) {
  int result = 0;
  if (!absl::SimpleAtoi(ToAbsl(value), &result)) {
    return absl::InvalidArgumentError(absl::StrCat("environment variable ", ToAbsl(name), "=",
                                                   Quoted(value), " is not a number"));
  }
  return result;
}

absl::StatusOr<int> RequiredInt(const EnvLookup& lookup, std::string_view name,
                                std::string_view launcher) {
  GENESIS_ASSIGN_OR_RETURN(std::string value, Required(lookup, name, launcher));
  return ToInt(name, value);
}

// The variable's number, or `fallback` where it is unset.
absl::StatusOr<int> OptionalInt(const EnvLookup& lookup, std::string_view name, int fallback) {
  std::optional<std::string> value = lookup(name);
  if (!value.has_value() || value->empty()) return fallback;
  return ToInt(name, *value);
}

// SLURM_NTASKS_PER_NODE is "4" or, for uneven nodes, "4(x2),3": the first count.
absl::StatusOr<int> SlurmTasksPerNode(const EnvLookup& lookup, int fallback) {
  std::optional<std::string> value = lookup("SLURM_NTASKS_PER_NODE");
  if (!value.has_value() || value->empty()) return fallback;
  const size_t end = value->find_first_of("(,");
  return ToInt("SLURM_NTASKS_PER_NODE", value->substr(0, end));
}

absl::Status CheckRange(std::string_view what, std::string_view name, int value, int limit) {
  if (value < 0 || value >= limit) {
    return absl::InvalidArgumentError(absl::StrCat(ToAbsl(what), " ", ToAbsl(name), "=", value,
                                                   " is outside [0, ", limit, ")"));
  }
  return absl::OkStatus();
}

// The names of the variables a launcher's fields came from, for errors.
struct VariableNames {
  std::string_view rank, size, local_rank, local_size;
};

absl::Status Validate(const LaunchEnv& env, const VariableNames& names) {
  if (env.world_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("world size ", ToAbsl(names.size), "=",
                                                   env.world_size, " is below 1"));
  }
  GENESIS_RETURN_IF_ERROR(CheckRange("rank", names.rank, env.rank, env.world_size));
  if (env.local_world_size < 1 || env.local_world_size > env.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("local world size ", ToAbsl(names.local_size), "=", env.local_world_size,
                     " is outside [1, ", env.world_size, "] (the world size)"));
  }
  GENESIS_RETURN_IF_ERROR(
      CheckRange("local rank", names.local_rank, env.local_rank, env.local_world_size));
  if (env.master_port < 1 || env.master_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("MASTER_PORT=", env.master_port, " is outside [1, 65535]"));
  }
  return absl::OkStatus();
}

// `text` with every character outside [A-Za-z0-9._-] replaced by '_', shortened (with
// a hash of the whole) to kMaxKeyLength.
std::string KeyText(std::string_view text) {
  std::string key;
  for (char c : text) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                       (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    key.push_back(plain ? c : '_');
  }
  if (key.size() > kMaxKeyLength) {
    key = absl::StrCat(key.substr(0, kMaxKeyLength - 17), "-",
                       absl::Hex(StableHash(text), absl::kZeroPad16));
  }
  return key;
}

// MASTER_ADDR, or 127.0.0.1 where every rank is on this host.
absl::StatusOr<std::string> MasterAddr(const EnvLookup& lookup, const LaunchEnv& env,
                                       std::string_view launcher) {
  if (IsSet(lookup, "MASTER_ADDR") || !env.single_host()) {
    return Required(lookup, "MASTER_ADDR", launcher);
  }
  return std::string("127.0.0.1");
}

// MASTER_PORT, or a port derived from the job key where the launcher's job id is
// unique (two jobs sharing a node then use different ports), or 29500.
absl::StatusOr<int> DerivedPort(const EnvLookup& lookup, const LaunchEnv& env) {
  if (IsSet(lookup, "MASTER_PORT")) return ToInt("MASTER_PORT", *lookup("MASTER_PORT"));
  if (!env.job_key_unique) return kDefaultPort;
  return 20000 + static_cast<int>(StableHash(env.job_key) % 20000);
}

// Checks `env`'s ranks, then fills in the rendezvous address (MasterAddr, DerivedPort,
// which need the checked ranks and the job key) and checks the port: for launchers that
// may leave MASTER_ADDR and MASTER_PORT out.
absl::StatusOr<LaunchEnv> WithRendezvous(const EnvLookup& lookup, LaunchEnv env,
                                         std::string_view launcher,
                                         const VariableNames& names) {
  env.master_port = kDefaultPort;  // A valid stand-in while the ranks are checked.
  GENESIS_RETURN_IF_ERROR(Validate(env, names));
  GENESIS_ASSIGN_OR_RETURN(env.master_addr, MasterAddr(lookup, env, launcher));
  GENESIS_ASSIGN_OR_RETURN(env.master_port, DerivedPort(lookup, env));
  GENESIS_RETURN_IF_ERROR(Validate(env, names));
  return env;
}

// Sets env.job_key from GENESIS_RUN_ID, or from `launcher_key` (unique or not).
void SetJobKey(const EnvLookup& lookup, LaunchEnv& env, std::string_view launcher_key,
               bool unique) {
  if (IsSet(lookup, "GENESIS_RUN_ID")) {
    env.job_key = KeyText(*lookup("GENESIS_RUN_ID"));
    env.job_key_unique = true;
    return;
  }
  env.job_key = KeyText(launcher_key.empty() ? "run" : launcher_key);
  env.job_key_unique = unique && !launcher_key.empty();
}

// torchrun's agent writes each worker's error file at
// <agent dir>/<run id>_<random>/attempt_<restart>/<local rank>/error.json: the part up
// to attempt_<restart> is the agent's own for this attempt, shared by its workers.
std::optional<std::string> AgentAttemptDir(const EnvLookup& lookup) {
  std::optional<std::string> file = lookup("TORCHELASTIC_ERROR_FILE");
  if (!file.has_value()) return std::nullopt;
  std::vector<absl::string_view> parts = absl::StrSplit(*file, '/', absl::SkipEmpty());
  if (parts.size() < 5 || !absl::StartsWith(parts[parts.size() - 3], "attempt_")) {
    return std::nullopt;
  }
  return absl::StrCat(parts[parts.size() - 5], "-", parts[parts.size() - 4], "-",
                      parts[parts.size() - 3]);
}

absl::StatusOr<LaunchEnv> FromTorchrun(const EnvLookup& lookup, bool by_torchrun) {
  const std::string_view launcher = by_torchrun ? "torchrun" : "env";
  LaunchEnv env;
  env.launcher = launcher;
  GENESIS_ASSIGN_OR_RETURN(env.rank, RequiredInt(lookup, "RANK", launcher));
  GENESIS_ASSIGN_OR_RETURN(env.world_size, RequiredInt(lookup, "WORLD_SIZE", launcher));
  GENESIS_ASSIGN_OR_RETURN(env.local_rank, OptionalInt(lookup, "LOCAL_RANK", env.rank));
  GENESIS_ASSIGN_OR_RETURN(env.local_world_size,
                           OptionalInt(lookup, "LOCAL_WORLD_SIZE", env.world_size));
  GENESIS_ASSIGN_OR_RETURN(env.master_addr, Required(lookup, "MASTER_ADDR", launcher));
  GENESIS_ASSIGN_OR_RETURN(env.master_port, RequiredInt(lookup, "MASTER_PORT", launcher));
  env.run_id = lookup("TORCHELASTIC_RUN_ID").value_or("");
  GENESIS_ASSIGN_OR_RETURN(const int restart,
                           OptionalInt(lookup, "TORCHELASTIC_RESTART_COUNT", 0));
  GENESIS_RETURN_IF_ERROR(
      Validate(env, {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"}));
  const bool default_id = env.run_id.empty() || env.run_id == "none";
  std::optional<std::string> agent = AgentAttemptDir(lookup);
  if (default_id && env.single_host() && agent.has_value()) {
    SetJobKey(lookup, env, *agent, /*unique=*/true);
  } else {
    SetJobKey(lookup, env, absl::StrCat(default_id ? "none" : env.run_id, ".r", restart),
              /*unique=*/!default_id);
  }
  return env;
}

absl::StatusOr<LaunchEnv> FromOpenMpi(const EnvLookup& lookup) {
  constexpr std::string_view kLauncher = "mpirun";
  LaunchEnv env;
  env.launcher = kLauncher;
  GENESIS_ASSIGN_OR_RETURN(env.rank, RequiredInt(lookup, "OMPI_COMM_WORLD_RANK", kLauncher));
  GENESIS_ASSIGN_OR_RETURN(env.world_size,
                           RequiredInt(lookup, "OMPI_COMM_WORLD_SIZE", kLauncher));
  GENESIS_ASSIGN_OR_RETURN(env.local_rank,
                           RequiredInt(lookup, "OMPI_COMM_WORLD_LOCAL_RANK", kLauncher));
  GENESIS_ASSIGN_OR_RETURN(env.local_world_size,
                           RequiredInt(lookup, "OMPI_COMM_WORLD_LOCAL_SIZE", kLauncher));
  env.run_id = lookup("OMPI_MCA_ess_base_jobid").value_or(lookup("PMIX_NAMESPACE").value_or(""));
  SetJobKey(lookup, env, env.run_id.empty() ? "" : absl::StrCat("ompi.", env.run_id),
            /*unique=*/true);
  return WithRendezvous(lookup, std::move(env), kLauncher,
                        {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                         "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"});
}

absl::StatusOr<LaunchEnv> FromSlurm(const EnvLookup& lookup) {
  constexpr std::string_view kLauncher = "slurm";
  const VariableNames names{"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
                            "SLURM_NTASKS_PER_NODE"};
  LaunchEnv env;
  env.launcher = kLauncher;
  GENESIS_ASSIGN_OR_RETURN(env.rank, RequiredInt(lookup, "SLURM_PROCID", kLauncher));
  GENESIS_ASSIGN_OR_RETURN(env.world_size, RequiredInt(lookup, "SLURM_NTASKS", kLauncher));
  GENESIS_ASSIGN_OR_RETURN(env.local_rank, RequiredInt(lookup, "SLURM_LOCALID", kLauncher));
  GENESIS_ASSIGN_OR_RETURN(env.local_world_size, SlurmTasksPerNode(lookup, env.world_size));
  if (IsSet(lookup, "SLURM_JOB_ID")) {
    env.run_id = absl::StrCat(*lookup("SLURM_JOB_ID"), ".",
                              lookup("SLURM_STEP_ID").value_or("0"));
  }
  GENESIS_ASSIGN_OR_RETURN(const int restart, OptionalInt(lookup, "SLURM_RESTART_COUNT", 0));
  SetJobKey(lookup, env,
            env.run_id.empty() ? "" : absl::StrCat("slurm.", env.run_id, ".r", restart),
            /*unique=*/true);
  return WithRendezvous(lookup, std::move(env), kLauncher, names);
}

// InvalidArgument naming both variables when `ours` (set) differs from `theirs`.
absl::Status SameValue(const EnvLookup& lookup, std::string_view ours,
                       std::string_view theirs) {
  std::optional<std::string> a = lookup(ours);
  std::optional<std::string> b = lookup(theirs);
  if (!a.has_value() || !b.has_value() || *a == *b) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "variables of two launchers contradict each other: ", ToAbsl(ours), "=", Quoted(*a),
      " but ", ToAbsl(theirs), "=", Quoted(*b), "; start the job with one launcher"));
}

}  // namespace

uint64_t StableHash(std::string_view text) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

absl::StatusOr<LaunchEnv> ParseLaunchEnv(const EnvLookup& lookup) {
  const bool torchrun = IsSet(lookup, "TORCHELASTIC_RUN_ID");
  const bool mpi = IsSet(lookup, "OMPI_COMM_WORLD_RANK") || IsSet(lookup, "OMPI_COMM_WORLD_SIZE");
  const bool env_vars = IsSet(lookup, "RANK") || IsSet(lookup, "WORLD_SIZE");
  const bool slurm = IsSet(lookup, "SLURM_PROCID") || IsSet(lookup, "SLURM_NTASKS");
  if (torchrun && mpi) {
    return absl::InvalidArgumentError(
        "variables of two launchers at once: TORCHELASTIC_RUN_ID (torchrun) and "
        "OMPI_COMM_WORLD_RANK (Open MPI's mpirun); start the job with one launcher");
  }
  // srun torchrun ...: Slurm's variables describe the agents, torchrun's the workers.
  if (torchrun) return FromTorchrun(lookup, /*by_torchrun=*/true);
  if (mpi) {
    GENESIS_RETURN_IF_ERROR(SameValue(lookup, "RANK", "OMPI_COMM_WORLD_RANK"));
    GENESIS_RETURN_IF_ERROR(SameValue(lookup, "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE"));
    return FromOpenMpi(lookup);
  }
  if (env_vars) {
    GENESIS_RETURN_IF_ERROR(SameValue(lookup, "RANK", "SLURM_PROCID"));
    GENESIS_RETURN_IF_ERROR(SameValue(lookup, "WORLD_SIZE", "SLURM_NTASKS"));
    return FromTorchrun(lookup, /*by_torchrun=*/false);
  }
  if (slurm) return FromSlurm(lookup);
  return absl::NotFoundError(
      "no launcher environment: none of torchrun's RANK and WORLD_SIZE, Open MPI's "
      "OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE, or Slurm's SLURM_PROCID and "
      "SLURM_NTASKS are set");
}

EnvLookup ProcessEnv() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* value = std::getenv(std::string(name).c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

absl::StatusOr<LaunchEnv> ReadLaunchEnv() { return ParseLaunchEnv(ProcessEnv()); }

}  // namespace genesis::distributed
