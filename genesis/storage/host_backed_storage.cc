#include "genesis/storage/host_backed_storage.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "genesis/core/absl_compat.h"
#include "genesis/core/status.h"

namespace genesis::storage {
namespace {

// A Storage over `bytes` at `base` that keeps `owner` (the mapping) alive.
template <typename Owner>
absl::StatusOr<Storage> Wrap(std::shared_ptr<Owner> owner, void* base, size_t bytes,
                             absl::Span<const int64_t> shape, DType dtype, bool read_only,
                             std::source_location where) {
  GENESIS_ASSIGN_OR_RETURN(const Layout layout, Layout::Contiguous(shape));
  return Storage::FromExternal(
      base, bytes, layout, dtype, Device::Cpu(), [owner = std::move(owner)](void*) {},
      {.read_only = read_only}, where);
}

// Closing while other storages use the memory would leave them dangling.
absl::Status CheckSoleUser(const Storage& storage, std::string_view what) {
  if (storage.use_count() <= 1) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "cannot close ", ToAbsl(what), ": ", storage.use_count() - 1,
      " other storages (views or copies) still use its memory"));
}

absl::Status Closed(std::string_view what) {
  return absl::FailedPreconditionError(absl::StrCat(ToAbsl(what), " is closed"));
}

}  // namespace

absl::StatusOr<MappedStorage> MappedStorage::Open(std::string_view path, MapMode mode,
                                                  absl::Span<const int64_t> shape,
                                                  DType dtype, size_t offset,
                                                  std::source_location where) {
  GENESIS_ASSIGN_OR_RETURN(const size_t bytes, ContiguousBytes(shape, dtype));
  if (bytes == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mapping '", ToAbsl(path), "': the shape has no elements (a mapping needs bytes)"));
  }
  GENESIS_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path, mode, bytes, offset));
  MappedStorage out;
  out.file_ = std::make_shared<MappedFile>(std::move(file));
  out.mode_ = mode;
  out.path_ = std::string(path);
  void* base = const_cast<std::byte*>(out.file_->data());
  GENESIS_ASSIGN_OR_RETURN(out.storage_, Wrap(out.file_, base, bytes, shape, dtype,
                                              mode == MapMode::kRead, where));
  return out;
}

absl::Status MappedStorage::Flush() {
  if (file_ == nullptr) return Closed(absl::StrCat("mapped file '", path_, "'"));
  return file_->Flush();
}

absl::Status MappedStorage::Close() {
  if (file_ == nullptr) return absl::OkStatus();
  GENESIS_RETURN_IF_ERROR(CheckSoleUser(storage_, absl::StrCat("mapped file '", path_, "'")));
  storage_ = Storage();
  const absl::Status status = file_->Close();
  file_.reset();
  return status;
}

absl::StatusOr<SharedStorage> SharedStorage::Create(std::string_view name,
                                                    absl::Span<const int64_t> shape,
                                                    DType dtype, std::source_location where) {
  GENESIS_ASSIGN_OR_RETURN(const size_t bytes, ContiguousBytes(shape, dtype));
  GENESIS_ASSIGN_OR_RETURN(SharedMemory memory, SharedMemory::Create(name, bytes));
  SharedStorage out;
  out.memory_ = std::make_shared<SharedMemory>(std::move(memory));
  out.name_ = out.memory_->name();
  out.owner_ = true;
  GENESIS_ASSIGN_OR_RETURN(out.storage_, Wrap(out.memory_, out.memory_->mutable_data(),
                                              bytes, shape, dtype, false, where));
  return out;
}

absl::StatusOr<SharedStorage> SharedStorage::Attach(std::string_view name,
                                                    absl::Span<const int64_t> shape,
                                                    DType dtype, SharedMemory::Access access,
                                                    std::source_location where) {
  GENESIS_ASSIGN_OR_RETURN(const size_t bytes, ContiguousBytes(shape, dtype));
  GENESIS_ASSIGN_OR_RETURN(SharedMemory memory, SharedMemory::Attach(name, access));
  if (memory.size() < bytes) {
    return absl::OutOfRangeError(absl::StrCat("shared memory '", memory.name(), "' has ",
                                              memory.size(), " bytes; the shape needs ",
                                              bytes));
  }
  SharedStorage out;
  out.memory_ = std::make_shared<SharedMemory>(std::move(memory));
  out.name_ = out.memory_->name();
  void* base = const_cast<std::byte*>(out.memory_->data());
  GENESIS_ASSIGN_OR_RETURN(out.storage_,
                           Wrap(out.memory_, base, bytes, shape, dtype,
                                access == SharedMemory::Access::kReadOnly, where));
  return out;
}

absl::Status SharedStorage::Unlink() {
  if (memory_ == nullptr) return Closed(absl::StrCat("shared memory '", name_, "'"));
  return memory_->Unlink();
}

absl::Status SharedStorage::Close() {
  if (memory_ == nullptr) return absl::OkStatus();
  GENESIS_RETURN_IF_ERROR(CheckSoleUser(storage_, absl::StrCat("shared memory '", name_, "'")));
  storage_ = Storage();
  const absl::Status status = memory_->Close();
  memory_.reset();  // The owner unlinks here.
  return status;
}

}  // namespace genesis::storage
