#include "genesis/distributed/launch_env.h"

#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace genesis::distributed {
namespace {

using Vars = absl::flat_hash_map<std::string, std::string>;

absl::StatusOr<LaunchEnv> Parse(const Vars& vars) {
  return ParseLaunchEnv([&](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  });
}

Vars Torchrun() {
  return {{"RANK", "5"},           {"WORLD_SIZE", "8"},         {"LOCAL_RANK", "1"},
          {"LOCAL_WORLD_SIZE", "4"}, {"MASTER_ADDR", "node0"}, {"MASTER_PORT", "29500"},
          {"TORCHELASTIC_RUN_ID", "job7"}};
}

void ExpectError(const Vars& vars, absl::StatusCode code, const std::string& text) {
  absl::Status status = Parse(vars).status();
  EXPECT_EQ(status.code(), code) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), text)) << status << " lacks " << text;
}

TEST(LaunchEnvTest, ReadsTorchrun) {
  auto env = Parse(Torchrun());
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->launcher, "torchrun");
  EXPECT_EQ(env->rank, 5);
  EXPECT_EQ(env->world_size, 8);
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_EQ(env->local_world_size, 4);
  EXPECT_EQ(env->master_addr, "node0");
  EXPECT_EQ(env->master_port, 29500);
  EXPECT_EQ(env->run_id, "job7");
  EXPECT_FALSE(env->single_host());
}

TEST(LaunchEnvTest, LocalRankDefaultsToOneHost) {
  Vars vars = Torchrun();
  vars.erase("LOCAL_RANK");
  vars.erase("LOCAL_WORLD_SIZE");
  auto env = Parse(vars);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->local_rank, 5);
  EXPECT_TRUE(env->single_host());
}

TEST(LaunchEnvTest, ReadsSlurm) {
  Vars vars = {{"SLURM_PROCID", "3"},           {"SLURM_NTASKS", "8"},
               {"SLURM_LOCALID", "3"},          {"SLURM_NTASKS_PER_NODE", "4(x2)"},
               {"MASTER_ADDR", "gpu-node-1"},   {"SLURM_JOB_ID", "1234"},
               {"SLURM_STEP_ID", "0"}};
  auto env = Parse(vars);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->launcher, "slurm");
  EXPECT_EQ(env->rank, 3);
  EXPECT_EQ(env->world_size, 8);
  EXPECT_EQ(env->local_world_size, 4);
  EXPECT_GE(env->master_port, 20000);  // Derived from the job id: no MASTER_PORT.
  EXPECT_EQ(env->run_id, "1234.0");
}

TEST(LaunchEnvTest, TorchrunWinsOverSlurm) {
  Vars vars = Torchrun();
  vars["SLURM_PROCID"] = "0";
  vars["SLURM_NTASKS"] = "1";
  auto env = Parse(vars);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->launcher, "torchrun");
}

TEST(LaunchEnvTest, MissingOrMalformedVariablesAreNamed) {
  ExpectError({}, absl::StatusCode::kNotFound, "RANK and WORLD_SIZE");
  Vars vars = Torchrun();
  vars.erase("MASTER_ADDR");
  ExpectError(vars, absl::StatusCode::kNotFound, "MASTER_ADDR");
  vars = Torchrun();
  vars["RANK"] = "five";
  ExpectError(vars, absl::StatusCode::kInvalidArgument, "RANK='five' is not a number");
  vars = Torchrun();
  vars["RANK"] = "8";
  ExpectError(vars, absl::StatusCode::kInvalidArgument, "rank RANK=8 is outside [0, 8)");
  vars = Torchrun();
  vars["WORLD_SIZE"] = "0";
  vars["RANK"] = "0";
  ExpectError(vars, absl::StatusCode::kInvalidArgument, "WORLD_SIZE=0 is below 1");
  vars = Torchrun();
  vars["LOCAL_RANK"] = "4";
  ExpectError(vars, absl::StatusCode::kInvalidArgument, "LOCAL_RANK=4 is outside [0, 4)");
  vars = Torchrun();
  vars["MASTER_PORT"] = "70000";
  ExpectError(vars, absl::StatusCode::kInvalidArgument, "MASTER_PORT=70000");
  vars = Torchrun();
  vars.erase("WORLD_SIZE");
  ExpectError(vars, absl::StatusCode::kNotFound, "WORLD_SIZE");
  ExpectError({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"MASTER_ADDR", "x"}},
              absl::StatusCode::kNotFound, "SLURM_LOCALID");
  ExpectError({{"SLURM_PROCID", "0"},
               {"SLURM_NTASKS", "2"},
               {"SLURM_LOCALID", "0"},
               {"SLURM_NTASKS_PER_NODE", "1"}},
              absl::StatusCode::kNotFound, "MASTER_ADDR");
  ExpectError({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}},
              absl::StatusCode::kNotFound, "OMPI_COMM_WORLD_LOCAL_RANK");
}

// ---- Open MPI's mpirun.

Vars OpenMpi() {
  return {{"OMPI_COMM_WORLD_RANK", "2"},       {"OMPI_COMM_WORLD_SIZE", "4"},
          {"OMPI_COMM_WORLD_LOCAL_RANK", "2"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
          {"OMPI_MCA_ess_base_jobid", "2142830593"}};
}

TEST(LaunchEnvTest, ReadsOpenMpi) {
  auto env = Parse(OpenMpi());
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->launcher, "mpirun");
  EXPECT_EQ(env->rank, 2);
  EXPECT_EQ(env->world_size, 4);
  EXPECT_EQ(env->local_rank, 2);
  EXPECT_TRUE(env->single_host());
  EXPECT_EQ(env->master_addr, "127.0.0.1");  // One host: no MASTER_ADDR needed.
  EXPECT_EQ(env->run_id, "2142830593");
  EXPECT_EQ(env->job_key, "ompi.2142830593");
  EXPECT_TRUE(env->job_key_unique);
  // No MASTER_PORT: one derived from the job id, the same on every rank.
  EXPECT_GE(env->master_port, 20000);
  EXPECT_LT(env->master_port, 40000);
  Vars other = OpenMpi();
  other["OMPI_MCA_ess_base_jobid"] = "2142830594";
  auto next = Parse(other);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_NE(next->job_key, env->job_key);
  EXPECT_NE(next->master_port, env->master_port);
  other["MASTER_PORT"] = "31000";
  other["MASTER_ADDR"] = "node3";
  next = Parse(other);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->master_port, 31000);
  EXPECT_EQ(next->master_addr, "node3");
}

TEST(LaunchEnvTest, OpenMpiOnSeveralHostsNeedsMasterAddr) {
  Vars vars = OpenMpi();
  vars["OMPI_COMM_WORLD_LOCAL_SIZE"] = "2";
  vars["OMPI_COMM_WORLD_LOCAL_RANK"] = "0";
  ExpectError(vars, absl::StatusCode::kNotFound, "MASTER_ADDR");
  vars["OMPI_COMM_WORLD_LOCAL_RANK"] = "2";
  vars["MASTER_ADDR"] = "node0";
  ExpectError(vars, absl::StatusCode::kInvalidArgument,
              "OMPI_COMM_WORLD_LOCAL_RANK=2 is outside [0, 2)");
}

// ---- Two launchers at once.

TEST(LaunchEnvTest, ContradictingLaunchersAreRefusedNamingBothVariables) {
  Vars vars = Torchrun();
  for (const auto& [k, v] : OpenMpi()) vars[k] = v;
  ExpectError(vars, absl::StatusCode::kInvalidArgument,
              "TORCHELASTIC_RUN_ID (torchrun) and OMPI_COMM_WORLD_RANK");
  vars = OpenMpi();
  vars["RANK"] = "0";
  ExpectError(vars, absl::StatusCode::kInvalidArgument,
              "RANK='0' but OMPI_COMM_WORLD_RANK='2'");
  vars["RANK"] = "2";
  vars["WORLD_SIZE"] = "4";
  EXPECT_TRUE(Parse(vars).ok());  // The same values: no contradiction.
  vars = {{"RANK", "1"},          {"WORLD_SIZE", "2"},   {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", "29500"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"},
          {"SLURM_LOCALID", "0"}};
  ExpectError(vars, absl::StatusCode::kInvalidArgument, "RANK='1' but SLURM_PROCID='0'");
  vars["SLURM_PROCID"] = "1";
  auto env = Parse(vars);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->launcher, "env");
}

// ---- The job key.

TEST(LaunchEnvTest, TorchrunDefaultsOnOneHostKeyOnTheAgentsAttempt) {
  Vars vars = {{"RANK", "1"},
               {"WORLD_SIZE", "2"},
               {"LOCAL_RANK", "1"},
               {"LOCAL_WORLD_SIZE", "2"},
               {"MASTER_ADDR", "127.0.0.1"},
               {"MASTER_PORT", "29500"},
               {"TORCHELASTIC_RUN_ID", "none"},
               {"TORCHELASTIC_RESTART_COUNT", "0"},
               {"TORCHELASTIC_ERROR_FILE",
                "/tmp/torchelastic_4tq960wx/none_cv6sa0wu/attempt_0/1/error.json"}};
  auto env = Parse(vars);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->job_key, "torchelastic_4tq960wx-none_cv6sa0wu-attempt_0");
  EXPECT_TRUE(env->job_key_unique);
  // The other worker of the same agent: the same key.
  vars["RANK"] = vars["LOCAL_RANK"] = "0";
  vars["TORCHELASTIC_ERROR_FILE"] =
      "/tmp/torchelastic_4tq960wx/none_cv6sa0wu/attempt_0/0/error.json";
  EXPECT_EQ(Parse(vars)->job_key, env->job_key);
  // The next launch (another agent directory) or the restarted attempt: another key.
  vars["TORCHELASTIC_ERROR_FILE"] =
      "/tmp/torchelastic_93kd0a1q/none_x0d83kq1/attempt_0/0/error.json";
  EXPECT_NE(Parse(vars)->job_key, env->job_key);
  vars["TORCHELASTIC_ERROR_FILE"] =
      "/tmp/torchelastic_4tq960wx/none_cv6sa0wu/attempt_1/0/error.json";
  EXPECT_NE(Parse(vars)->job_key, env->job_key);
  // By hand, without an agent: the default id, which may repeat.
  vars.erase("TORCHELASTIC_ERROR_FILE");
  env = Parse(vars);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->job_key, "none.r0");
  EXPECT_FALSE(env->job_key_unique);
}

TEST(LaunchEnvTest, KeyOfSeveralAgentsIsTheRunIdAndRestart) {
  Vars vars = Torchrun();  // Two hosts, run id job7.
  vars["TORCHELASTIC_RESTART_COUNT"] = "2";
  vars["TORCHELASTIC_ERROR_FILE"] = "/tmp/torchelastic_a/job7_b/attempt_2/1/error.json";
  auto env = Parse(vars);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->job_key, "job7.r2");  // Not the agent's directory: it differs per host.
  EXPECT_TRUE(env->job_key_unique);
  vars["TORCHELASTIC_RUN_ID"] = "none";
  env = Parse(vars);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->job_key, "none.r2");
  EXPECT_FALSE(env->job_key_unique);
}

TEST(LaunchEnvTest, GenesisRunIdOverridesAndKeysAreSafeNames) {
  Vars vars = Torchrun();
  vars["GENESIS_RUN_ID"] = "exp 12/../x";
  auto env = Parse(vars);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->job_key, "exp_12_.._x");
  EXPECT_TRUE(env->job_key_unique);
  vars["GENESIS_RUN_ID"] = std::string(300, 'a');
  env = Parse(vars);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->job_key.size(), 96u);
}

TEST(LaunchEnvTest, SlurmKeyAndPort) {
  Vars vars = {{"SLURM_PROCID", "1"},  {"SLURM_NTASKS", "2"},  {"SLURM_LOCALID", "1"},
               {"SLURM_JOB_ID", "77"}, {"SLURM_STEP_ID", "3"}, {"SLURM_RESTART_COUNT", "1"}};
  auto env = Parse(vars);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->master_addr, "127.0.0.1");
  EXPECT_EQ(env->job_key, "slurm.77.3.r1");
  EXPECT_GE(env->master_port, 20000);
  EXPECT_LT(env->master_port, 40000);
  vars.erase("SLURM_JOB_ID");
  env = Parse(vars);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->master_port, 29500);
  EXPECT_FALSE(env->job_key_unique);
}

TEST(LaunchEnvTest, StableHashIsFnv1a) {
  EXPECT_EQ(StableHash(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(StableHash("a"), 0xaf63dc4c8601ec8cULL);
}

}  // namespace
}  // namespace genesis::distributed
