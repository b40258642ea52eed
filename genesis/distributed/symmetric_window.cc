#include "genesis/distributed/symmetric_window.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "genesis/core/status.h"
#include "genesis/storage/layout.h"

namespace genesis::distributed {

namespace {

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

}  // namespace

absl::StatusOr<std::shared_ptr<SymmetricWindow>> SymmetricWindow::Create(ProcessGroup& group,
                                                                         size_t bytes) {
  GENESIS_ASSIGN_OR_RETURN(std::shared_ptr<SymmetricMemory> memory,
                           group.AllocateSymmetric(RoundUp(bytes, kAlignment)));
  return std::shared_ptr<SymmetricWindow>(new SymmetricWindow(std::move(memory), group.device()));
}

size_t SymmetricWindow::used() const {
  std::lock_guard<std::mutex> lock(mu_);
  return used_;
}

absl::StatusOr<storage::Storage> SymmetricWindow::Allocate(absl::Span<const int64_t> shape,
                                                            DType dtype, CUstream_st* stream) {
  GENESIS_ASSIGN_OR_RETURN(storage::Layout layout, storage::Layout::Contiguous(shape));
  const size_t nbytes = static_cast<size_t>(layout.numel()) * ItemSize(dtype);
  size_t offset;
  {
    std::lock_guard<std::mutex> lock(mu_);
    offset = used_;
    if (nbytes > memory_->bytes - offset) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "symmetric window of ", memory_->bytes, " bytes: a storage of ", nbytes,
          " bytes does not fit in the ", memory_->bytes - offset, " bytes left"));
    }
    used_ = std::min(memory_->bytes, RoundUp(offset + nbytes, kAlignment));
  }
  storage::ExternalOptions options;
  options.stream = stream;
  char* const base = static_cast<char*>(memory_->data) + offset;
  // The storage keeps the window, and with it the memory and its registration.
  return storage::Storage::FromExternal(base, nbytes, layout, dtype, device_,
                                        [window = shared_from_this()](void*) {}, options);
}

}  // namespace genesis::distributed
