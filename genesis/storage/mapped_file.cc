#include "genesis/storage/mapped_file.h"

#include <fcntl.h>
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
#include "genesis/storage/internal/posix_error.h"

namespace genesis::storage {
namespace {

using internal::PosixError;
using internal::ScopedFd;

struct ModeSpelling {
  MapMode mode;
  std::string_view letters;  // numpy.memmap's
  std::string_view name;     // MapModeName's
};
constexpr ModeSpelling kModeSpellings[] = {
    {MapMode::kRead, "r", "read"},
    {MapMode::kReadWrite, "r+", "read_write"},
    {MapMode::kCopyOnWrite, "c", "copy_on_write"},
    {MapMode::kCreate, "w+", "create"},
};

// Whether writes to the mapping reach the file.
bool WritesThrough(MapMode mode) {
  return mode == MapMode::kReadWrite || mode == MapMode::kCreate;
}

int OpenFlags(MapMode mode) {
  switch (mode) {
    case MapMode::kRead:
    case MapMode::kCopyOnWrite:  // A private mapping may be writable over a read-only fd.
      return O_RDONLY | O_CLOEXEC;
    case MapMode::kReadWrite:
      return O_RDWR | O_CLOEXEC;
    case MapMode::kCreate:
      return O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC;
  }
  return O_RDONLY | O_CLOEXEC;
}

int ToMadvise(MapAdvice advice) {
  switch (advice) {
    case MapAdvice::kNormal:
      return MADV_NORMAL;
    case MapAdvice::kSequential:
      return MADV_SEQUENTIAL;
    case MapAdvice::kRandom:
      return MADV_RANDOM;
    case MapAdvice::kWillNeed:
      return MADV_WILLNEED;
  }
  return MADV_NORMAL;
}

}  // namespace

absl::StatusOr<MapMode> ParseMapMode(std::string_view text) {
  for (const ModeSpelling& spelling : kModeSpellings) {
    if (text == spelling.letters || text == spelling.name) return spelling.mode;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown map mode ", Quoted(text),
      "; expected r, r+, c, w+ or read, read_write, copy_on_write, create"));
}

std::string_view MapModeName(MapMode mode) {
  for (const ModeSpelling& spelling : kModeSpellings) {
    if (spelling.mode == mode) return spelling.name;
  }
  return "unknown";
}

size_t PageSize() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

absl::StatusOr<MappedFile> MappedFile::Open(std::string_view path, MapMode mode,
                                            size_t bytes, size_t offset) {
  MappedFile file;
  file.path_ = std::string(path);
  file.mode_ = mode;
  const std::string quoted = Quoted(path);
  const std::string_view mode_name = MapModeName(mode);
  if (path.find('\0') != std::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot map ", quoted, ": the path contains a NUL character"));
  }
  size_t end = 0;  // offset + bytes: the file size the mapping needs.
  constexpr size_t kMaxFileSize = std::numeric_limits<off_t>::max();
  if (__builtin_add_overflow(offset, bytes, &end) || end > kMaxFileSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot map ", bytes, " bytes at offset ", offset, " of ", quoted,
                     ": the end lies beyond the largest file offset, ", kMaxFileSize));
  }
  if (mode == MapMode::kCreate && bytes == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot create ", quoted, " to map: mode create needs the size (bytes > 0)"));
  }

  ScopedFd fd(open(file.path_.c_str(), OpenFlags(mode), 0666));
  if (fd.get() < 0) {
    const int err = errno;
    return PosixError(err, absl::StrCat("cannot open ", quoted, " to map it as ",
                                        ToAbsl(mode_name)));
  }
  struct stat st;
  if (fstat(fd.get(), &st) != 0) {
    const int err = errno;
    return PosixError(err, absl::StrCat("cannot stat ", quoted));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot map ", quoted, ": it is ",
                     S_ISDIR(st.st_mode) ? "a directory" : "not a regular file"));
  }
  if (mode == MapMode::kCreate && ftruncate(fd.get(), static_cast<off_t>(end)) != 0) {
    const int err = errno;
    return PosixError(err, absl::StrCat("cannot size ", quoted, " to ", end, " bytes"));
  }
  const size_t file_size = mode == MapMode::kCreate ? end : static_cast<size_t>(st.st_size);
  if (bytes == 0) {
    if (file_size == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot map ", quoted, ": the file is empty"));
    }
    if (offset >= file_size) {
      return absl::OutOfRangeError(absl::StrCat("cannot map ", quoted, " from offset ",
                                                offset, " to its end: the file has only ",
                                                file_size, " bytes"));
    }
    bytes = file_size - offset;
  } else if (end > file_size) {
    return absl::OutOfRangeError(absl::StrCat("cannot map ", bytes, " bytes at offset ",
                                              offset, " of ", quoted, ": the file has ",
                                              file_size, " bytes, the mapping needs ", end));
  }

  // mmap takes page-aligned offsets: map from the page boundary at or below `offset`.
  const size_t skip = offset % PageSize();
  const int prot = mode == MapMode::kRead ? PROT_READ : PROT_READ | PROT_WRITE;
  const int flags = mode == MapMode::kCopyOnWrite ? MAP_PRIVATE : MAP_SHARED;
  void* base = mmap(nullptr, bytes + skip, prot, flags, fd.get(),
                    static_cast<off_t>(offset - skip));
  if (base == MAP_FAILED) {
    const int err = errno;
    return PosixError(err, absl::StrCat("cannot map ", bytes, " bytes at offset ", offset,
                                        " of ", quoted, " as ", ToAbsl(mode_name)));
  }
  file.base_ = base;
  file.mapped_bytes_ = bytes + skip;
  file.data_ = static_cast<std::byte*>(base) + skip;
  file.size_ = bytes;
  return file;
}

MappedFile::MappedFile(MappedFile&& other) noexcept { *this = std::move(other); }

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    Unmap().IgnoreError();
    path_ = std::exchange(other.path_, std::string());
    mode_ = other.mode_;
    base_ = std::exchange(other.base_, nullptr);
    mapped_bytes_ = std::exchange(other.mapped_bytes_, 0);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

MappedFile::~MappedFile() { Unmap().IgnoreError(); }

absl::Status MappedFile::Flush() {
  if (data_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot flush the mapping of ", Quoted(path_), ": it is closed"));
  }
  if (!WritesThrough(mode_)) return absl::OkStatus();
  if (msync(base_, mapped_bytes_, MS_SYNC) != 0) {
    const int err = errno;
    return PosixError(err, absl::StrCat("cannot flush the mapping of ", Quoted(path_)));
  }
  return absl::OkStatus();
}

absl::Status MappedFile::Advise(MapAdvice advice) {
  if (data_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot advise on the mapping of ", Quoted(path_), ": it is closed"));
  }
  if (madvise(base_, mapped_bytes_, ToMadvise(advice)) != 0) {
    const int err = errno;
    return PosixError(err, absl::StrCat("madvise on the mapping of ", Quoted(path_)));
  }
  return absl::OkStatus();
}

absl::Status MappedFile::Close() {
  if (data_ == nullptr) return absl::OkStatus();
  const absl::Status flushed = Flush();
  const absl::Status unmapped = Unmap();
  return flushed.ok() ? unmapped : flushed;
}

absl::Status MappedFile::Unmap() {
  if (base_ == nullptr) return absl::OkStatus();
  void* base = std::exchange(base_, nullptr);
  const size_t bytes = std::exchange(mapped_bytes_, 0);
  data_ = nullptr;
  size_ = 0;
  if (munmap(base, bytes) != 0) {
    const int err = errno;
    return PosixError(err, absl::StrCat("cannot unmap ", Quoted(path_)));
  }
  return absl::OkStatus();
}

}  // namespace genesis::storage
