#include "tools/genesis/bench_runner.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

extern char** environ;

namespace genesis::cli {
namespace {

namespace fs = std::filesystem;

// The directory of this binary (symlinks resolved), "" if unknown.
std::string ExeDir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "" : exe.parent_path().string();
}

// Runfiles roots of this workspace, most specific first.
std::vector<std::string> RunfilesRoots() {
  std::vector<std::string> roots;
  for (const char* var : {"RUNFILES_DIR", "TEST_SRCDIR"}) {
    if (const char* v = std::getenv(var); v != nullptr && *v) {
      roots.push_back(absl::StrCat(v, "/genesis"));
    }
  }
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) roots.push_back(exe.string() + ".runfiles/genesis");
  roots.push_back(fs::current_path(ec).string());  // `bazel run` starts in the runfiles.
  return roots;
}

bool IsFile(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

}  // namespace

std::string FindBenchBinary(const std::string& package, const std::string& target,
                            std::string* looked_in) {
  std::vector<std::string> candidates;
  if (const std::string dir = ExeDir(); !dir.empty()) {
    candidates.push_back(absl::StrCat(dir, "/benchmarks/",
                                      absl::StrReplaceAll(package, {{"/", "_"}}), "_", target));
  }
  for (const std::string& root : RunfilesRoots()) {
    candidates.push_back(absl::StrCat(root, "/", package, "/", target));
  }
  for (const std::string& c : candidates) {
    if (IsFile(c) && access(c.c_str(), X_OK) == 0) return c;
  }
  if (looked_in != nullptr) *looked_in = absl::StrJoin(candidates, ", ");
  return "";
}

std::string FindDataFile(const std::string& repo_path) {
  std::vector<std::string> candidates;
  if (const std::string dir = ExeDir(); !dir.empty()) {
    candidates.push_back(absl::StrCat(dir, "/", fs::path(repo_path).filename().string()));
  }
  for (const std::string& root : RunfilesRoots()) {
    candidates.push_back(absl::StrCat(root, "/", repo_path));
  }
  for (const std::string& c : candidates) {
    if (IsFile(c)) return c;
  }
  return "";
}

std::vector<std::string> FindTraces() {
  std::vector<std::string> dirs;
  if (const std::string dir = ExeDir(); !dir.empty()) dirs.push_back(dir + "/traces");
  for (const std::string& root : RunfilesRoots()) dirs.push_back(root + "/traces");
  for (const std::string& dir : dirs) {
    std::vector<std::string> traces;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.size() > 9 && name.substr(name.size() - 9) == ".trace.gz") {
        traces.push_back(entry.path().string());
      }
    }
    if (!traces.empty()) {
      std::sort(traces.begin(), traces.end());
      return traces;
    }
  }
  return {};
}

absl::StatusOr<int> RunLogged(const std::vector<std::string>& argv,
                              const std::map<std::string, std::string>& env,
                              const std::string& log_path) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string key = entry.substr(0, entry.find('='));
    if (!env.count(key)) env_strings.push_back(entry);
  }
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> c_env, c_argv;
  for (std::string& s : env_strings) c_env.push_back(s.data());
  c_env.push_back(nullptr);
  std::vector<std::string> args = argv;
  for (std::string& s : args) c_argv.push_back(s.data());
  c_argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  pid_t pid = 0;
  const int err = posix_spawn(&pid, c_argv[0], &actions, nullptr, c_argv.data(), c_env.data());
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0) {
    return absl::InternalError(absl::StrCat("cannot start ", argv[0], ": ", std::strerror(err)));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      return absl::InternalError(absl::StrCat("waiting for ", argv[0], ": ", std::strerror(errno)));
    }
  }
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

std::string LastLine(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  }
  return last;
}

}  // namespace genesis::cli
