// Internal glue for the POSIX calls behind genesis/storage's host-memory kinds
// (SharedMemory, MappedFile): errno to absl::Status, and a file descriptor that closes
// itself on every error path. Not part of the public API.
#ifndef GENESIS_STORAGE_INTERNAL_POSIX_ERROR_H_
#define GENESIS_STORAGE_INTERNAL_POSIX_ERROR_H_

#include <unistd.h>

#include <string_view>

#include "absl/status/status.h"
#include "genesis/core/absl_compat.h"

namespace genesis::storage::internal {

// The status for a system call that failed with `err` (an errno value, saved before
// anything else can overwrite it): the code absl::ErrnoToStatusCode maps it to
// (ENOENT: NotFound, EEXIST: AlreadyExists, EACCES: PermissionDenied, ...) and the
// message "`context`: <strerror text>", e.g.
//   "cannot open '/data/w.bin' for reading: No such file or directory".
inline absl::Status PosixError(int err, std::string_view context) {
  return absl::ErrnoToStatus(err, ToAbsl(context));
}

// Owns a file descriptor and closes it when destroyed; -1 means none. Close errors are
// ignored: the descriptors here only ever back an mmap, which keeps its own reference.
class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  ~ScopedFd() {
    if (fd_ >= 0) ::close(fd_);
  }

  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace genesis::storage::internal

#endif  // GENESIS_STORAGE_INTERNAL_POSIX_ERROR_H_
