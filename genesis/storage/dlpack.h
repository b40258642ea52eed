// DLPack for storages (F24): hand any storage view to PyTorch, JAX or CuPy as a
// DLManagedTensor, and take one from them as a Storage, zero-copy both ways.
//
//   GENESIS_ASSIGN_OR_RETURN(DLManagedTensor* out, ToDLPack(storage));
//   // ... give `out` to torch.utils.dlpack.from_dlpack (as a "dltensor" capsule) ...
//   GENESIS_ASSIGN_OR_RETURN(Storage in, FromDLPack(tensor_from_torch));
//
// The exported tensor keeps the storage's memory alive until its consumer calls the
// deleter; an imported tensor's deleter runs when the last Storage using it goes. The
// translation rules (devices, dtypes, strides, where the view's offset goes) are in
// dlpack_convert.h. CUDA storages are exported with the memory's own pointer; work
// queued on the storage's stream should be finished (or ordered by the consumer) before
// the consumer reads it, as DLPack leaves stream ordering to the caller.
#ifndef GENESIS_STORAGE_DLPACK_H_
#define GENESIS_STORAGE_DLPACK_H_

#include <source_location>

#include "absl/status/statusor.h"
#include "dlpack/dlpack.h"
#include "genesis/storage/storage.h"

namespace genesis::storage {

// A new DLManagedTensor describing `storage`'s view (any strides, offset, dtype and
// device); it holds a reference to the memory until its deleter runs. FailedPrecondition
// for an undefined storage.
absl::StatusOr<DLManagedTensor*> ToDLPack(const Storage& storage);

// A Storage over `tensor`'s memory and view, taking ownership of `tensor` in every case:
// its deleter runs once the last Storage using it goes, or before this returns if it
// fails. InvalidArgument for a null tensor or for what ReadDLPack rejects (a device or
// dtype genesis does not support, named); OutOfRange / FailedPrecondition for a CUDA
// device that does not exist here. Imported CUDA storages use the legacy default stream;
// imported host memory is neither pinned nor read-only unless kDLCUDAHost says pinned.
absl::StatusOr<Storage> FromDLPack(
    DLManagedTensor* tensor, std::source_location where = std::source_location::current());

}  // namespace genesis::storage

#endif  // GENESIS_STORAGE_DLPACK_H_
