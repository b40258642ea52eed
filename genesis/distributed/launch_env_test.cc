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
  EXPECT_EQ(env->master_port, 29500);
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
  ExpectError({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "0"}},
              absl::StatusCode::kNotFound, "MASTER_ADDR");
}

}  // namespace
}  // namespace genesis::distributed
