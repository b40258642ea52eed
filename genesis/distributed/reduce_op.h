// Reductions of the collectives (all_reduce, reduce, reduce_scatter) and which dtypes
// each backend reduces.
//
// kAvg is the sum divided by the group's size; it needs a floating dtype on every
// backend (NCCL would truncate integers, Gloo has no average), so both refuse it for
// integers and bool alike and a program behaves the same on CPU and GPU.
#ifndef GENESIS_DISTRIBUTED_REDUCE_OP_H_
#define GENESIS_DISTRIBUTED_REDUCE_OP_H_

#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "genesis/core/dtype.h"

namespace genesis::distributed {

enum class ReduceOp { kSum, kProd, kMin, kMax, kAvg };

// "sum", "prod", "min", "max", "avg".
std::string_view ReduceOpName(ReduceOp op);

// The inverse of ReduceOpName; InvalidArgument naming `name` otherwise.
absl::StatusOr<ReduceOp> ParseReduceOp(std::string_view name);

// OK if `op` is defined for `dtype` on every backend; InvalidArgument naming both
// otherwise (kAvg of a non-floating dtype). Backends refuse more (NCCL: bool, int16).
absl::Status CheckReduction(ReduceOp op, DType dtype);

}  // namespace genesis::distributed

#endif  // GENESIS_DISTRIBUTED_REDUCE_OP_H_
