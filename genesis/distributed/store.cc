#include "genesis/distributed/store.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "genesis/core/status.h"
#include "gloo/common/error.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/rendezvous/hash_store.h"

namespace genesis::distributed {
namespace {

// The lock file of a shared directory: every member holds a shared flock on it while
// its Store lives; the kernel drops the lock of a process that dies.
constexpr char kMembersLock[] = "genesis-members.lock";

// Removes everything in `directory` but the lock file: keys of members that are gone.
void RemoveStaleKeys(const std::string& directory) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(directory, error)) {
    if (entry.path().filename() != kMembersLock) std::filesystem::remove_all(entry.path(), error);
  }
}

}  // namespace

Store::Store(std::unique_ptr<gloo::rendezvous::Store> store, std::string description,
             std::string directory, int lock_fd)
    : store_(std::move(store)),
      description_(std::move(description)),
      directory_(std::move(directory)),
      lock_fd_(lock_fd) {}

Store::~Store() {
  store_.reset();
  if (lock_fd_ < 0) return;
  // No other member alive (the exclusive lock is free): the directory is nobody's.
  if (flock(lock_fd_, LOCK_EX | LOCK_NB) == 0) {
    std::error_code ignored;
    std::filesystem::remove_all(directory_, ignored);
  }
  close(lock_fd_);
}

absl::StatusOr<int> Store::JoinMembers(const std::string& directory) {
  const std::string path = absl::StrCat(directory, "/", kMembersLock);
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("file store: cannot open '", path, "': ", std::strerror(errno)));
  }
  // The first member to find no other alive clears what members of an earlier job left
  // (their keys would be read as this job's), before it writes any key of its own.
  // Once a member holds its shared lock, no later one can take the exclusive lock, so
  // no key of a live member is ever removed.
  if (flock(fd, LOCK_EX | LOCK_NB) == 0) RemoveStaleKeys(directory);
  if (flock(fd, LOCK_SH) != 0) {
    const int error = errno;
    close(fd);
    return absl::UnavailableError(
        absl::StrCat("file store: cannot lock '", path, "': ", std::strerror(error)));
  }
  return fd;
}

absl::StatusOr<std::shared_ptr<Store>> Store::File(const std::string& directory,
                                                   bool shared) {
  if (directory.empty()) {
    return absl::InvalidArgumentError("file store: the directory is empty");
  }
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (error) {
    return absl::PermissionDeniedError(absl::StrCat("file store: cannot create directory '",
                                                    directory, "': ", error.message()));
  }
  if (::access(directory.c_str(), W_OK | X_OK) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("file store: directory '", directory, "' is not writable"));
  }
  int lock_fd = -1;
  if (shared) {
    GENESIS_ASSIGN_OR_RETURN(lock_fd, JoinMembers(directory));
  }
  try {
    return std::shared_ptr<Store>(
        new Store(std::make_unique<gloo::rendezvous::FileStore>(directory),
                  absl::StrCat("file store at ", directory), directory, lock_fd));
  } catch (const std::exception& e) {
    if (lock_fd >= 0) close(lock_fd);
    return absl::InternalError(absl::StrCat("file store at '", directory, "': ", e.what()));
  }
}

std::shared_ptr<Store> Store::Hash() {
  return std::shared_ptr<Store>(
      new Store(std::make_unique<gloo::rendezvous::HashStore>(), "hash store", "", -1));
}

absl::Status Store::Set(const std::string& key, absl::Span<const char> value) {
  try {
    store_->set(key, std::vector<char>(value.begin(), value.end()));
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat(description_, ": cannot set '", key, "': ", e.what()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<char>> Store::Get(const std::string& key, absl::Duration timeout) {
  try {
    store_->wait({key}, absl::ToChronoMilliseconds(timeout));
    return store_->get(key);
  } catch (const gloo::IoException& e) {
    return absl::DeadlineExceededError(absl::StrCat(description_, ": key '", key,
                                                    "' not set within ",
                                                    absl::FormatDuration(timeout), ": ",
                                                    e.what()));
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat(description_, ": cannot get '", key, "': ", e.what()));
  }
}

}  // namespace genesis::distributed
