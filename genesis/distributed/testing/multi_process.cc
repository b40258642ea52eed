#include "genesis/distributed/testing/multi_process.h"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace genesis::distributed::testing {

std::string RankOutcome::Describe() const {
  std::string what = timed_out ? "hung and was killed"
                     : stopped_after_failure
                         ? absl::StrCat("was killed, still running, after rank ", failed_first,
                                        " failed")
                     : signal != 0 ? absl::StrCat("died of signal ", signal)
                                   : absl::StrCat("exited with ", exit_code);
  return absl::StrCat("rank ", rank, " ", what, " after ", absl::FormatDuration(elapsed),
                      message.empty() ? "" : ": ", message);
}

std::vector<RankOutcome> RunRanks(int n, absl::Duration timeout,
                                  const std::function<std::string(int rank)>& body,
                                  absl::Duration failure_grace) {
  std::fflush(nullptr);
  const absl::Time start = absl::Now();
  std::vector<pid_t> pids(n, -1);
  std::vector<int> pipes(n, -1);
  for (int rank = 0; rank < n; ++rank) {
    int fds[2];
    if (pipe(fds) != 0) std::abort();
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      const std::string error = body(rank);
      if (!error.empty()) {
        (void)!write(fds[1], error.data(), error.size());
      }
      close(fds[1]);
      std::fflush(nullptr);
      _exit(error.empty() ? 0 : 1);
    }
    close(fds[1]);
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    pids[rank] = pid;
    pipes[rank] = fds[0];
  }
  std::vector<RankOutcome> outcomes(n);
  int running = n;
  auto drain = [&](int rank) {
    char buf[4096];
    ssize_t got;
    while ((got = read(pipes[rank], buf, sizeof(buf))) > 0) {
      outcomes[rank].message.append(buf, static_cast<size_t>(got));
    }
  };
  for (int rank = 0; rank < n; ++rank) outcomes[rank].rank = rank;
  int failed_first = -1;  // The first rank that failed, and when.
  absl::Time failed_at;
  while (running > 0) {
    for (int rank = 0; rank < n; ++rank) {
      if (pids[rank] < 0) continue;
      drain(rank);
      int status = 0;
      const pid_t done = waitpid(pids[rank], &status, WNOHANG);
      if (done == 0) continue;
      drain(rank);
      outcomes[rank].elapsed = absl::Now() - start;
      if (WIFEXITED(status)) outcomes[rank].exit_code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) outcomes[rank].signal = WTERMSIG(status);
      if (failed_first < 0 && (outcomes[rank].exit_code != 0 || outcomes[rank].signal != 0)) {
        failed_first = rank;
        failed_at = absl::Now();
      }
      pids[rank] = -1;
      --running;
    }
    const bool past_deadline = absl::Now() - start > timeout;
    const bool past_grace = failed_first >= 0 && absl::Now() - failed_at > failure_grace;
    if (running > 0 && (past_deadline || past_grace)) {
      for (int rank = 0; rank < n; ++rank) {
        if (pids[rank] < 0) continue;
        kill(pids[rank], SIGKILL);
        waitpid(pids[rank], nullptr, 0);
        drain(rank);
        if (past_deadline) {
          outcomes[rank].timed_out = true;
        } else {
          outcomes[rank].stopped_after_failure = true;
          outcomes[rank].failed_first = failed_first;
        }
        outcomes[rank].elapsed = absl::Now() - start;
        pids[rank] = -1;
        --running;
      }
    }
    if (running > 0) usleep(2000);
  }
  for (int fd : pipes) close(fd);
  return outcomes;
}

std::string FreshDirectory(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  static int counter = 0;
  std::string path = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name, "-", getpid(),
                                  "-", counter++);
  std::filesystem::remove_all(path);
  std::filesystem::create_directories(path);
  return path;
}

}  // namespace genesis::distributed::testing
