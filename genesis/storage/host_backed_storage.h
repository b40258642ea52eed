// Storages whose host memory lives outside the pools: a memory-mapped file
// (MappedStorage, F7) and named POSIX shared memory (SharedStorage, F6).
//
//   GENESIS_ASSIGN_OR_RETURN(MappedStorage weights, MappedStorage::Open(
//       "layer0.bin", MapMode::kRead, {4096, 4096}, DType::kBFloat16));
//   GENESIS_ASSIGN_OR_RETURN(Storage on_gpu, weights.storage().To(Device::Cuda(0)));
//
//   // Process A (the owner):                  // Process B (an attacher):
//   GENESIS_ASSIGN_OR_RETURN(                  GENESIS_ASSIGN_OR_RETURN(
//       SharedStorage batch,                       SharedStorage batch,
//       SharedStorage::Create("/batch_7",          SharedStorage::Attach("/batch_7",
//           {64, 3, 224, 224}, DType::kUInt8));        {64, 3, 224, 224}, DType::kUInt8));
//
// Each object holds the mapping and a Storage over it (storage()); views and copies of
// that Storage keep the mapping alive after the object is gone, like any Storage. A
// storage over a file mapped kRead, or over shared memory attached read-only, is
// read-only (Storage::is_read_only): copies into it and fills fail instead of faulting.
// Moving such a storage to a GPU (To(Device::Cuda(n))) copies straight from the mapped
// pages to the device: there is no intermediate host copy of the whole buffer.
//
// Bad input is reported by MappedFile / SharedMemory (missing or short files, names
// that exist on Create or do not on Attach; see mapped_file.h, shared_memory.h), by
// Layout for bad shapes, and here for a region too small for the shape (OutOfRange
// giving both sizes). Not thread-safe beyond what Storage is.
#ifndef GENESIS_STORAGE_HOST_BACKED_STORAGE_H_
#define GENESIS_STORAGE_HOST_BACKED_STORAGE_H_

#include <cstddef>
#include <memory>
#include <source_location>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "genesis/core/dtype.h"
#include "genesis/storage/mapped_file.h"
#include "genesis/storage/shared_memory.h"
#include "genesis/storage/storage.h"

namespace genesis::storage {

class MappedStorage {
 public:
  // Maps the numel(shape) * itemsize bytes of `path` from byte `offset` as `mode` says
  // (kCreate makes the file offset + those bytes long, zero-filled) and views them as a
  // contiguous `shape` of `dtype`. Errors as MappedFile::Open's (OutOfRange for a short
  // file), InvalidArgument for a bad shape or dtype or an empty shape with kCreate.
  static absl::StatusOr<MappedStorage> Open(
      std::string_view path, MapMode mode, absl::Span<const int64_t> shape, DType dtype,
      size_t offset = 0, std::source_location where = std::source_location::current());

  MappedStorage(MappedStorage&&) = default;
  MappedStorage& operator=(MappedStorage&&) = default;

  // The storage over the mapping; undefined once closed.
  const Storage& storage() const { return storage_; }
  MapMode mode() const { return mode_; }
  const std::string& path() const { return path_; }

  // kReadWrite / kCreate: writes changed pages to the file and waits for them (msync);
  // OK for the other modes. FailedPrecondition once closed.
  absl::Status Flush();
  // Flushes and unmaps. FailedPrecondition, with nothing done, while other Storage
  // objects still use the mapping (it says how many); they would be left dangling.
  // Idempotent.
  absl::Status Close();

 private:
  MappedStorage() = default;

  std::shared_ptr<MappedFile> file_;
  Storage storage_;
  MapMode mode_ = MapMode::kRead;
  std::string path_;
};

class SharedStorage {
 public:
  // Creates the shared-memory region `name` (shared_memory.h's rules), zero-filled, of
  // numel(shape) * itemsize bytes, viewed as a contiguous `shape` of `dtype`; this
  // object owns the name and unlinks it when closed or destroyed (after the last view).
  // AlreadyExists naming `name` if the region exists; InvalidArgument for a bad name,
  // shape or dtype, or an empty shape (regions have at least one byte).
  static absl::StatusOr<SharedStorage> Create(
      std::string_view name, absl::Span<const int64_t> shape, DType dtype,
      std::source_location where = std::source_location::current());
  // Attaches to the existing region `name` and views its first numel(shape) * itemsize
  // bytes as `shape` of `dtype` (read-only storage with Access::kReadOnly). NotFound
  // naming `name` if there is no such region; OutOfRange if it is smaller than the
  // shape needs.
  static absl::StatusOr<SharedStorage> Attach(
      std::string_view name, absl::Span<const int64_t> shape, DType dtype,
      SharedMemory::Access access = SharedMemory::Access::kReadWrite,
      std::source_location where = std::source_location::current());

  SharedStorage(SharedStorage&&) = default;
  SharedStorage& operator=(SharedStorage&&) = default;

  const Storage& storage() const { return storage_; }
  const std::string& name() const { return name_; }
  bool is_owner() const { return owner_; }

  // Owner only: removes the name now (existing mappings stay valid). As
  // SharedMemory::Unlink; FailedPrecondition for an attacher or once closed.
  absl::Status Unlink();
  // Unmaps (and, for the owner, unlinks unless already done). FailedPrecondition, with
  // nothing done, while other Storage objects still use the region. Idempotent.
  absl::Status Close();

 private:
  SharedStorage() = default;

  std::shared_ptr<SharedMemory> memory_;
  Storage storage_;
  std::string name_;
  bool owner_ = false;
};

}  // namespace genesis::storage

#endif  // GENESIS_STORAGE_HOST_BACKED_STORAGE_H_
