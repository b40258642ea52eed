// CPU-only implementation of cuda_ipc.h: there are no CUDA storages to share.
#include "absl/strings/str_cat.h"
#include "genesis/core/absl_compat.h"
#include "genesis/storage/cuda_ipc.h"

namespace genesis::storage {
namespace {

absl::Status NoCuda(std::string_view what) {
  return absl::FailedPreconditionError(absl::StrCat(
      "genesis was built without CUDA support (CPU-only build); cannot ", ToAbsl(what)));
}

}  // namespace

absl::Status SendCudaStorage(int socket, const Storage& storage) {
  if (!storage.defined() || !storage.device().is_cuda()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SendCudaStorage: ", storage.ToString(), " is not a CUDA storage"));
  }
  return NoCuda("share a CUDA storage");
}

absl::StatusOr<Storage> ReceiveCudaStorage(int socket, std::source_location where) {
  return NoCuda("receive a CUDA storage");
}

}  // namespace genesis::storage
