// Element-wise reductions for Gloo, for every genesis dtype: Gloo reduces with a
// function the caller gives it (out = f(a, b) over n elements), and Gloo itself knows
// neither bfloat16 nor bool.
//
// float16 and bfloat16 are reduced in float and rounded back (round to nearest even),
// one step at a time, as NCCL does. bool: sum and max are "or", prod and min are "and".
// kAvg reduces as kSum; the caller then divides by the group's size (DivideInPlace).
#ifndef GENESIS_DISTRIBUTED_GLOO_GLOO_REDUCE_H_
#define GENESIS_DISTRIBUTED_GLOO_GLOO_REDUCE_H_

#include <cstddef>
#include <functional>

#include "genesis/core/dtype.h"
#include "genesis/distributed/reduce_op.h"

namespace genesis::distributed::gloo_backend {

using ReduceFunction = std::function<void(void* out, const void* a, const void* b, size_t n)>;

// The reduction of `op` over `dtype` (kAvg: the sum). Defined for every dtype and op
// that CheckReduction accepts.
ReduceFunction ReductionFor(DType dtype, ReduceOp op);

// Divides `count` elements of floating `dtype` at `data` by `divisor`, in place.
void DivideInPlace(void* data, size_t count, DType dtype, int divisor);

}  // namespace genesis::distributed::gloo_backend

#endif  // GENESIS_DISTRIBUTED_GLOO_GLOO_REDUCE_H_
