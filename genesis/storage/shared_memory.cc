#include "genesis/storage/shared_memory.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <limits>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "genesis/core/absl_compat.h"
#include "genesis/core/status.h"
#include "genesis/storage/internal/posix_error.h"

namespace genesis::storage {
namespace {

using internal::PosixError;
using internal::ScopedFd;

// `name` with its leading '/', or InvalidArgument quoting it when shm_open would reject
// it or read it as a path.
absl::StatusOr<std::string> NormalizeName(std::string_view name) {
  std::string_view bare = name;
  if (!bare.empty() && bare.front() == '/') bare.remove_prefix(1);
  auto invalid = [name](std::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid shared memory name ", Quoted(name), ": ", ToAbsl(why)));
  };
  if (bare.empty()) return invalid("empty");
  if (bare.size() > NAME_MAX) {
    return invalid(absl::StrCat(bare.size(), " characters after the '/', more than NAME_MAX (",
                                NAME_MAX, ")"));
  }
  if (bare.find('/') != std::string_view::npos) {
    return invalid("a '/' other than the leading one");
  }
  if (bare.find('\0') != std::string_view::npos) return invalid("contains a NUL character");
  if (bare == "." || bare == "..") return invalid("'.' and '..' are not names");
  return absl::StrCat("/", ToAbsl(bare));
}

// Maps all `bytes` of the shared memory object open as `fd`, shared between processes.
absl::StatusOr<std::byte*> MapShared(int fd, size_t bytes, bool writable,
                                     const std::string& name) {
  void* data = mmap(nullptr, bytes, writable ? PROT_READ | PROT_WRITE : PROT_READ,
                    MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) {
    const int err = errno;
    return PosixError(err, absl::StrCat("cannot map shared memory ", Quoted(name), " (",
                                        bytes, " bytes)"));
  }
  return static_cast<std::byte*>(data);
}

}  // namespace

absl::StatusOr<SharedMemory> SharedMemory::Create(std::string_view name, size_t bytes) {
  SharedMemory shm;
  GENESIS_ASSIGN_OR_RETURN(shm.name_, NormalizeName(name));
  constexpr size_t kMaxBytes = std::numeric_limits<off_t>::max();
  if (bytes == 0 || bytes > kMaxBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot create shared memory ", Quoted(shm.name_), " of ", bytes,
                     " bytes: the size must be between 1 and ", kMaxBytes));
  }
  ScopedFd fd(shm_open(shm.name_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (fd.get() < 0) {
    const int err = errno;
    return PosixError(err, absl::StrCat("cannot create shared memory ", Quoted(shm.name_)));
  }
  // The name is ours from here on: an error return destroys `shm`, which unlinks it.
  shm.owner_ = true;
  shm.writable_ = true;
  shm.unlink_on_destroy_ = true;
  // A new object grows with zeros, which is what makes the region zero-filled.
  if (ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0) {
    const int err = errno;
    return PosixError(err, absl::StrCat("cannot size shared memory ", Quoted(shm.name_),
                                        " to ", bytes, " bytes"));
  }
  GENESIS_ASSIGN_OR_RETURN(shm.data_, MapShared(fd.get(), bytes, true, shm.name_));
  shm.size_ = bytes;
  return shm;
}

absl::StatusOr<SharedMemory> SharedMemory::Attach(std::string_view name, Access access) {
  SharedMemory shm;
  GENESIS_ASSIGN_OR_RETURN(shm.name_, NormalizeName(name));
  shm.writable_ = access == Access::kReadWrite;
  ScopedFd fd(shm_open(shm.name_.c_str(), (shm.writable_ ? O_RDWR : O_RDONLY) | O_CLOEXEC, 0));
  if (fd.get() < 0) {
    const int err = errno;
    return PosixError(err, absl::StrCat("cannot attach to shared memory ", Quoted(shm.name_),
                                        shm.writable_ ? " for reading and writing"
                                                      : " for reading"));
  }
  struct stat st;
  if (fstat(fd.get(), &st) != 0) {
    const int err = errno;
    return PosixError(err, absl::StrCat("cannot stat shared memory ", Quoted(shm.name_)));
  }
  if (st.st_size <= 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("shared memory ", Quoted(shm.name_),
                     " has size 0, so there is nothing to attach to (has its creator "
                     "sized it yet?)"));
  }
  const size_t bytes = static_cast<size_t>(st.st_size);
  GENESIS_ASSIGN_OR_RETURN(shm.data_, MapShared(fd.get(), bytes, shm.writable_, shm.name_));
  shm.size_ = bytes;
  return shm;
}

SharedMemory::SharedMemory(SharedMemory&& other) noexcept { *this = std::move(other); }

SharedMemory& SharedMemory::operator=(SharedMemory&& other) noexcept {
  if (this != &other) {
    Reset();
    name_ = std::exchange(other.name_, std::string());
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    owner_ = std::exchange(other.owner_, false);
    writable_ = std::exchange(other.writable_, false);
    unlink_on_destroy_ = std::exchange(other.unlink_on_destroy_, false);
    unlinked_ = std::exchange(other.unlinked_, false);
  }
  return *this;
}

SharedMemory::~SharedMemory() { Reset(); }

void SharedMemory::Reset() noexcept {
  Close().IgnoreError();
  if (unlink_on_destroy_) shm_unlink(name_.c_str());
  unlink_on_destroy_ = false;
}

absl::Status SharedMemory::Close() {
  if (data_ == nullptr) return absl::OkStatus();
  void* data = std::exchange(data_, nullptr);
  const size_t bytes = std::exchange(size_, 0);
  if (munmap(data, bytes) != 0) {
    const int err = errno;
    return PosixError(err, absl::StrCat("cannot unmap shared memory ", Quoted(name_)));
  }
  return absl::OkStatus();
}

absl::Status SharedMemory::Unlink() {
  if (!owner_) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot unlink shared memory ", Quoted(name_),
                     ": only its owner (the object Create() returned) may, and this one "
                     "attached to it"));
  }
  if (unlinked_) return absl::OkStatus();
  if (shm_unlink(name_.c_str()) != 0) {
    const int err = errno;
    return PosixError(err, absl::StrCat("cannot unlink shared memory ", Quoted(name_)));
  }
  unlinked_ = true;
  unlink_on_destroy_ = false;
  return absl::OkStatus();
}

}  // namespace genesis::storage
