// Named POSIX shared memory (shm_open + mmap): host storage that several processes map at
// once, e.g. a data-loader worker filling a batch that the trainer process reads without a
// copy.
//
// One process creates the region under a name and owns it; others attach by that name:
//
//   GENESIS_ASSIGN_OR_RETURN(SharedMemory batch, SharedMemory::Create("/batch_7", bytes));
//   FillBatch(batch.mutable_data(), batch.size());        // zero-filled to begin with
//   ... tell the worker the name "/batch_7" ...
//   // in the other process:
//   GENESIS_ASSIGN_OR_RETURN(SharedMemory view, SharedMemory::Attach("/batch_7"));
//
// Lifetime of the name. By default the owner's lifetime is the name's lifetime: the
// owner's destructor unmaps and unlinks the name, so a crash-free program never leaves a
// region behind in /dev/shm. (Python's multiprocessing.shared_memory leaves the name until
// someone calls unlink(); here that is opt-in through KeepName().) Unlinking only removes
// the name: every existing mapping, in any process, stays valid until it is unmapped, so
// attach before the owner goes away. An attacher's destructor only unmaps.
//
// Names follow shm_open(3): one optional leading '/' (added when missing), then 1 to
// NAME_MAX (255) characters with no '/' and no NUL, and not "." or "..". name() always
// returns the form with the leading '/'.
//
// Thread safety: the const members may be called concurrently; everything else needs
// external synchronisation, like any standard container. The bytes themselves are plain
// memory shared between processes: their synchronisation is the caller's.
#ifndef GENESIS_STORAGE_SHARED_MEMORY_H_
#define GENESIS_STORAGE_SHARED_MEMORY_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace genesis::storage {

class SharedMemory {
 public:
  // How an attacher maps the region. A read-only mapping faults on a write.
  enum class Access { kReadWrite, kReadOnly };

  // Creates the region `name` (see the file comment for valid names) of `bytes` bytes,
  // zero-filled, with mode 0600 (this user only), maps it read-write and returns its owner.
  // Errors: InvalidArgument naming a bad name, or for `bytes` 0 or above the largest
  // file size; AlreadyExists naming `name` when a region of that name exists (it is never
  // reused or resized); otherwise the failing system call's code and errno text. On
  // error nothing is left behind under `name`.
  static absl::StatusOr<SharedMemory> Create(std::string_view name, size_t bytes);

  // Maps the existing region `name`, whole (its size comes from the region itself), and
  // returns a non-owning attacher. Errors: InvalidArgument naming a bad name; NotFound
  // naming `name` when no such region exists; PermissionDenied when this process may not
  // open it with `access`; FailedPrecondition when the region has size 0 (its creator has
  // not sized it yet); otherwise the failing system call's code and errno text.
  static absl::StatusOr<SharedMemory> Attach(std::string_view name,
                                             Access access = Access::kReadWrite);

  SharedMemory(SharedMemory&& other) noexcept;
  // Releases what this object held (as the destructor would), then takes over `other`.
  SharedMemory& operator=(SharedMemory&& other) noexcept;
  SharedMemory(const SharedMemory&) = delete;
  SharedMemory& operator=(const SharedMemory&) = delete;
  // Unmaps; an owner also unlinks the name unless KeepName() or Unlink() was called.
  // Errors are ignored: call Close() / Unlink() first to see them.
  ~SharedMemory();

  // The first byte of the mapping; nullptr once closed (or moved from).
  const std::byte* data() const { return data_; }
  // The same bytes for writing; nullptr for a read-only attacher and once closed.
  std::byte* mutable_data() { return writable_ ? data_ : nullptr; }
  // Bytes mapped: the size given to Create(), or the region's size for Attach(); 0 once
  // closed.
  size_t size() const { return size_; }
  // The name with its leading '/', as shm_open sees it; kept after Close().
  const std::string& name() const { return name_; }
  // True for the object Create() returned (and what it is moved into).
  bool is_owner() const { return owner_; }
  // True while mutable_data() is not nullptr.
  bool writable() const { return writable_ && data_ != nullptr; }

  // Unmaps the region; data() is nullptr and size() 0 afterwards. The name is untouched
  // (an owner still unlinks it when destroyed). Idempotent: closing again is OK. Should
  // munmap fail, the error carries its errno code and text; the object is closed anyway.
  absl::Status Close();

  // Owner only: removes the name now, so a later Create() may reuse it and Attach() finds
  // nothing; existing mappings, including this one, stay usable. Idempotent for the
  // owner. FailedPrecondition naming the region for an attacher; the errno code and text
  // when shm_unlink fails (NotFound if someone else unlinked the name meanwhile).
  absl::Status Unlink();

  // Owner only (no effect for an attacher): the destructor will not unlink the name, so
  // the region outlives this object until someone calls shm_unlink (or Unlink() on
  // another owner) or the machine reboots. For hand-offs where the owner exits first.
  void KeepName() { unlink_on_destroy_ = false; }

 private:
  SharedMemory() = default;  // Closed, nameless, not an owner.
  // What the destructor does: unmaps, then unlinks if still asked to. Leaves the object
  // closed and without a name to unlink.
  void Reset() noexcept;

  std::string name_;
  std::byte* data_ = nullptr;
  size_t size_ = 0;
  bool owner_ = false;
  bool writable_ = false;
  bool unlink_on_destroy_ = false;  // Owner that has not unlinked nor asked to keep.
  bool unlinked_ = false;           // Owner whose Unlink() succeeded.
};

}  // namespace genesis::storage

#endif  // GENESIS_STORAGE_SHARED_MEMORY_H_
