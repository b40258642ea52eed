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
// ignored: the descriptors here back an mmap or a CUDA import, which keep their own
// references.
class ScopedFd {
 public:
  explicit ScopedFd(int fd = -1) : fd_(fd) {}
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  ScopedFd(ScopedFd&& other) noexcept : fd_(other.release()) {}
  ScopedFd& operator=(ScopedFd&& other) noexcept {
    if (this != &other) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = other.release();
    }
    return *this;
  }
  ~ScopedFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  // Gives up ownership: returns the descriptor, which is then the caller's to close.
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

}  // namespace genesis::storage::internal

#endif  // GENESIS_STORAGE_INTERNAL_POSIX_ERROR_H_
