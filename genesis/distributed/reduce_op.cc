#include "genesis/distributed/reduce_op.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "genesis/core/absl_compat.h"

namespace genesis::distributed {

namespace {
constexpr ReduceOp kAll[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
                             ReduceOp::kAvg};
}  // namespace

std::string_view ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kProd: return "prod";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kAvg: return "avg";
  }
  return "unknown";
}

absl::StatusOr<ReduceOp> ParseReduceOp(std::string_view name) {
  for (ReduceOp op : kAll) {
    if (ReduceOpName(op) == name) return op;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown reduction ", Quoted(name),
                                                 ": expected sum, prod, min, max or avg"));
}

absl::Status CheckReduction(ReduceOp op, DType dtype) {
  if (op == ReduceOp::kAvg && !IsFloatingPoint(dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("reduction avg needs a floating dtype, not ", ToAbsl(DTypeName(dtype)),
                     " (sum it and divide, or convert first)"));
  }
  return absl::OkStatus();
}

}  // namespace genesis::distributed
