#include "genesis/storage/dlpack.h"

#include <utility>

#include "genesis/core/status.h"
#include "genesis/storage/dlpack_convert.h"

namespace genesis::storage {

absl::StatusOr<DLManagedTensor*> ToDLPack(const Storage& storage) {
  if (!storage.defined()) {
    return absl::FailedPreconditionError("ToDLPack on an undefined storage");
  }
  return ExportDLPack({.data = storage.base_ptr(),
                       .layout = storage.layout(),
                       .dtype = storage.dtype(),
                       .device = storage.device(),
                       .pinned_host = storage.is_pinned()},
                      [keep = storage]() mutable { keep = Storage(); });
}

absl::StatusOr<Storage> FromDLPack(DLManagedTensor* tensor, std::source_location where) {
  if (tensor == nullptr) return absl::InvalidArgumentError("FromDLPack of a null tensor");
  const absl::StatusOr<DLPackView> view = ReadDLPack(*tensor);
  if (!view.ok()) {
    ReleaseDLPack(tensor);
    return view.status();
  }
  const size_t nbytes = static_cast<size_t>(view->layout.extent()) * ItemSize(view->dtype);
  return Storage::FromExternal(
      view->data, nbytes, view->layout, view->dtype, view->device,
      [tensor](void*) { ReleaseDLPack(tensor); }, {.pinned = view->pinned_host}, where);
}

}  // namespace genesis::storage
