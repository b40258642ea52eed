#include "genesis/distributed/nccl/copy_engine_plan.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace genesis::distributed::nccl_backend {

absl::StatusOr<CopyEngineLayout> CopyEngineLayout::Create(int ranks, size_t piece) {
  if (ranks < 2 || ranks > kCopyEngineMaxRanks) {
    return absl::InvalidArgumentError(absl::StrCat("the copy engines' all_reduce serves 2 to ",
                                                   kCopyEngineMaxRanks, " ranks, not ", ranks));
  }
  const size_t unit = ranks * kCopyEngineAlignment;
  if (piece < unit) {
    return absl::InvalidArgumentError(absl::StrCat("a piece of ", piece, " bytes for ", ranks,
                                                   " ranks: at least ", unit, " bytes"));
  }
  return CopyEngineLayout(ranks, piece / unit * unit);
}

CopyEngineChunk CopyEngineLayout::ChunkOf(size_t bytes, size_t k, int rank) const {
  const size_t start = k * piece_;
  const size_t length = std::min(piece_, bytes - std::min(bytes, start));
  const size_t share = (length + ranks_ - 1) / ranks_;
  const size_t part =
      (share + kCopyEngineAlignment - 1) / kCopyEngineAlignment * kCopyEngineAlignment;
  const size_t from = std::min(length, rank * part);
  const size_t to = std::min(length, from + part);
  return {start + from, to - from};
}

std::string CopyEngineStats::ToString() const {
  if (!enabled) return absl::StrCat("off: ", unavailable);
  return absl::StrCat("on from ", min_bytes, " bytes (pieces of ", piece, "): ", operations,
                      " all_reduces");
}

bool CopyEngineReduces(DType dtype, ReduceOp op) {
  return op == ReduceOp::kSum && IsFloatingPoint(dtype);
}

}  // namespace genesis::distributed::nccl_backend
