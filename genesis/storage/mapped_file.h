// Memory-mapped files (mmap): host storage whose bytes live in a file, so a tensor can be
// read without loading it first (a checkpoint's weights) or written straight into a file.
//
//   GENESIS_ASSIGN_OR_RETURN(MappedFile weights,
//                            MappedFile::Open("model.bin", MapMode::kRead, bytes, offset));
//   GENESIS_RETURN_IF_ERROR(weights.Advise(MapAdvice::kSequential));  // before uploading
//   Upload(weights.data(), weights.size());
//
// The modes are numpy.memmap's, and ParseMapMode() reads numpy's letters for them:
//
//   kRead         "r"   "read"           existing file, read-only mapping
//   kReadWrite    "r+"  "read_write"     existing file, writes reach the file
//   kCopyOnWrite  "c"   "copy_on_write"  existing file, writable, but writes stay in this
//                                        mapping (private copies of the touched pages);
//                                        the file never changes
//   kCreate       "w+"  "create"         creates the file or truncates an existing one to
//                                        offset + bytes zero bytes, then maps it like
//                                        kReadWrite
//
// Any byte offset may be mapped: the mapping starts at the page boundary at or below it
// and data() points at the requested byte.
//
// The file must keep at least the mapped size while mapped: touching a page beyond a
// file truncated meanwhile (by anyone) raises SIGBUS, as with any mmap.
//
// Thread safety: the const members may be called concurrently; everything else needs
// external synchronisation. The mapped bytes are plain memory.
#ifndef GENESIS_STORAGE_MAPPED_FILE_H_
#define GENESIS_STORAGE_MAPPED_FILE_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace genesis::storage {

// How MappedFile::Open opens and maps a file; see the file comment.
enum class MapMode { kRead, kReadWrite, kCopyOnWrite, kCreate };

// The mode spelled `text`: numpy's "r", "r+", "c", "w+", or the names MapModeName()
// returns ("read", "read_write", "copy_on_write", "create"); exact, case-sensitive.
// Anything else is InvalidArgument quoting `text` and listing the accepted spellings.
absl::StatusOr<MapMode> ParseMapMode(std::string_view text);

// "read", "read_write", "copy_on_write" or "create"; ParseMapMode() reads it back.
std::string_view MapModeName(MapMode mode);

// Access-pattern hints for MappedFile::Advise (madvise): kSequential reads ahead
// aggressively and drops pages behind, kRandom turns read-ahead off, kWillNeed starts
// reading the whole mapping in now (e.g. before copying it to a GPU), kNormal undoes them.
enum class MapAdvice { kNormal, kSequential, kRandom, kWillNeed };

// The system's page size in bytes (sysconf(_SC_PAGESIZE)); mmap's unit.
size_t PageSize();

class MappedFile {
 public:
  // Maps `bytes` bytes of the file `path` starting at byte `offset` (any offset), as
  // `mode` says. `bytes` 0 means "from `offset` to the end of the file", except for
  // kCreate, which needs `bytes` > 0 and makes the file exactly offset + bytes long.
  // Errors, each naming `path`:
  //   InvalidArgument  kCreate with `bytes` 0; an empty file with `bytes` 0; offset +
  //                    bytes beyond the largest file offset; a path containing NUL
  //   NotFound         the file (kRead, kReadWrite, kCopyOnWrite) or its directory is
  //                    missing
  //   OutOfRange       the file is shorter than offset + bytes, or (`bytes` 0) not longer
  //                    than `offset`; the message gives both sizes
  //   PermissionDenied the file may not be opened as `mode` needs, e.g. kReadWrite or
  //                    kCreate on a read-only file (kCopyOnWrite needs only read access)
  //   FailedPrecondition  `path` is a directory or another non-regular file
  //   otherwise the failing system call's code and errno text.
  // kCreate creates or truncates the file before anything can fail on mapping, so an
  // error after that leaves the file behind.
  static absl::StatusOr<MappedFile> Open(std::string_view path, MapMode mode,
                                         size_t bytes = 0, size_t offset = 0);

  MappedFile(MappedFile&& other) noexcept;
  // Unmaps what this object held (as the destructor would), then takes over `other`.
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  // Unmaps without msync: changes of kReadWrite / kCreate still reach the file (other
  // readers see them at once, the disk when the kernel writes them back), but without
  // waiting or reporting errors. Call Close() for that.
  ~MappedFile();

  // The first requested byte (the one at `offset` in the file); nullptr once closed (or
  // moved from).
  const std::byte* data() const { return data_; }
  // The same bytes for writing; nullptr for kRead and once closed. Writes reach the file
  // in kReadWrite and kCreate, and only this mapping in kCopyOnWrite.
  std::byte* mutable_data() { return writable() ? data_ : nullptr; }
  // Bytes mapped from data() on; 0 once closed.
  size_t size() const { return size_; }
  MapMode mode() const { return mode_; }
  // The path as given to Open(); kept after Close().
  const std::string& path() const { return path_; }
  // True while mutable_data() is not nullptr: open and not kRead.
  bool writable() const { return mode_ != MapMode::kRead && data_ != nullptr; }

  // kReadWrite / kCreate: writes the changed pages to the file and waits until they are
  // on the storage device (msync MS_SYNC); the errno code and text on failure. kRead and
  // kCopyOnWrite have nothing to write: OK. FailedPrecondition naming the path once
  // closed.
  absl::Status Flush();

  // Passes `advice` for the whole mapping to the kernel (madvise); a hint, so the data
  // is the same whatever it does. FailedPrecondition once closed; the errno code and text
  // if madvise refuses.
  absl::Status Advise(MapAdvice advice);

  // Flushes (kReadWrite / kCreate, as Flush()) and unmaps; data() is nullptr and size()
  // 0 afterwards, even when the flush failed, whose error is then returned. Idempotent:
  // closing again is OK.
  absl::Status Close();

 private:
  MappedFile() = default;  // Closed.
  // munmap, leaving the object closed whatever it returns.
  absl::Status Unmap();

  std::string path_;
  MapMode mode_ = MapMode::kRead;
  void* base_ = nullptr;     // What mmap returned: the page at or below `offset`.
  size_t mapped_bytes_ = 0;  // The length given to mmap: size_ + (offset % PageSize()).
  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace genesis::storage

#endif  // GENESIS_STORAGE_MAPPED_FILE_H_
