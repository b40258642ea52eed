#include "benchmarks/distributed/fork_ranks.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace genesis::benchmarks {

int VisibleGpus() {
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES")) {
    const std::string v = visible;
    return v.empty() ? 0 : static_cast<int>(std::count(v.begin(), v.end(), ',')) + 1;
  }
  std::error_code error;
  int n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/driver/nvidia/gpus", error);
       !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
    ++n;
  }
  return n;
}

std::optional<int> ForkRanksUnlessLaunched(int nproc, bool gloo) {
  if (std::getenv("RANK") != nullptr) return std::nullopt;
  const int n = nproc > 0 ? nproc : (gloo ? 2 : std::max(1, VisibleGpus()));
  const std::string port = std::to_string(20000 + getpid() % 20000);
  const std::string store = absl::StrCat("/tmp/genesis-bench-", getpid());
  std::vector<pid_t> children;
  for (int rank = 0; rank < n; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) {
      setenv("RANK", std::to_string(rank).c_str(), 1);
      setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(n).c_str(), 1);
      setenv("LOCAL_WORLD_SIZE", std::to_string(n).c_str(), 1);
      setenv("MASTER_ADDR", "127.0.0.1", 1);
      setenv("MASTER_PORT", port.c_str(), 1);
      setenv("GENESIS_STORE_DIR", store.c_str(), 1);
      return std::nullopt;
    }
    children.push_back(pid);
  }
  int worst = 0;
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) worst = 1;
  }
  std::filesystem::remove_all(store);
  return worst;
}

int RankMain(int nproc, bool gloo, absl::Status (*run_rank)()) {
  setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
  if (std::optional<int> parent = ForkRanksUnlessLaunched(nproc, gloo)) return *parent;
  const absl::Status status = run_rank();
  if (!status.ok()) {
    std::fprintf(stderr, "rank %s: %s\n", std::getenv("RANK"), status.ToString().c_str());
    return 1;
  }
  return 0;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace genesis::benchmarks
