#include "genesis/distributed/launch_env.h"

#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "genesis/core/absl_compat.h"
#include "genesis/core/status.h"

namespace genesis::distributed {
namespace {

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

absl::Status Validate(const LaunchEnv& env, std::string_view rank_var,
                      std::string_view size_var, std::string_view local_rank_var,
                      std::string_view local_size_var) {
  if (env.world_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("world size ", ToAbsl(size_var), "=",
                                                   env.world_size, " is below 1"));
  }
  GENESIS_RETURN_IF_ERROR(CheckRange("rank", rank_var, env.rank, env.world_size));
  if (env.local_world_size < 1 || env.local_world_size > env.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("local world size ", ToAbsl(local_size_var), "=", env.local_world_size,
                     " is outside [1, ", env.world_size, "] (the world size)"));
  }
  GENESIS_RETURN_IF_ERROR(
      CheckRange("local rank", local_rank_var, env.local_rank, env.local_world_size));
  if (env.master_port < 1 || env.master_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("MASTER_PORT=", env.master_port, " is outside [1, 65535]"));
  }
  return absl::OkStatus();
}

absl::StatusOr<LaunchEnv> FromTorchrun(const EnvLookup& lookup) {
  constexpr std::string_view kLauncher = "torchrun";
  LaunchEnv env;
  env.launcher = kLauncher;
  GENESIS_ASSIGN_OR_RETURN(env.rank, RequiredInt(lookup, "RANK", kLauncher));
  GENESIS_ASSIGN_OR_RETURN(env.world_size, RequiredInt(lookup, "WORLD_SIZE", kLauncher));
  GENESIS_ASSIGN_OR_RETURN(env.local_rank, OptionalInt(lookup, "LOCAL_RANK", env.rank));
  GENESIS_ASSIGN_OR_RETURN(env.local_world_size,
                           OptionalInt(lookup, "LOCAL_WORLD_SIZE", env.world_size));
  GENESIS_ASSIGN_OR_RETURN(env.master_addr, Required(lookup, "MASTER_ADDR", kLauncher));
  GENESIS_ASSIGN_OR_RETURN(env.master_port, RequiredInt(lookup, "MASTER_PORT", kLauncher));
  env.run_id = lookup("TORCHELASTIC_RUN_ID").value_or("");
  GENESIS_RETURN_IF_ERROR(
      Validate(env, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"));
  return env;
}

absl::StatusOr<LaunchEnv> FromSlurm(const EnvLookup& lookup) {
  constexpr std::string_view kLauncher = "slurm";
  LaunchEnv env;
  env.launcher = kLauncher;
  GENESIS_ASSIGN_OR_RETURN(env.rank, RequiredInt(lookup, "SLURM_PROCID", kLauncher));
  GENESIS_ASSIGN_OR_RETURN(env.world_size, RequiredInt(lookup, "SLURM_NTASKS", kLauncher));
  GENESIS_ASSIGN_OR_RETURN(env.local_rank, RequiredInt(lookup, "SLURM_LOCALID", kLauncher));
  GENESIS_ASSIGN_OR_RETURN(env.local_world_size, SlurmTasksPerNode(lookup, env.world_size));
  GENESIS_ASSIGN_OR_RETURN(env.master_addr, Required(lookup, "MASTER_ADDR", kLauncher));
  GENESIS_ASSIGN_OR_RETURN(env.master_port, OptionalInt(lookup, "MASTER_PORT", 29500));
  std::optional<std::string> job = lookup("SLURM_JOB_ID");
  if (job.has_value()) {
    env.run_id = absl::StrCat(*job, ".", lookup("SLURM_STEP_ID").value_or("0"));
  }
  GENESIS_RETURN_IF_ERROR(Validate(env, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
                                   "SLURM_NTASKS_PER_NODE"));
  return env;
}

}  // namespace

absl::StatusOr<LaunchEnv> ParseLaunchEnv(const EnvLookup& lookup) {
  if (lookup("RANK").has_value() || lookup("WORLD_SIZE").has_value()) {
    return FromTorchrun(lookup);
  }
  if (lookup("SLURM_PROCID").has_value() || lookup("SLURM_NTASKS").has_value()) {
    return FromSlurm(lookup);
  }
  return absl::NotFoundError(
      "no launcher environment: neither torchrun's RANK and WORLD_SIZE nor Slurm's "
      "SLURM_PROCID and SLURM_NTASKS are set");
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
