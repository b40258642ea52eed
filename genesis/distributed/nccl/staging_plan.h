// Where the buffers of one registered NCCL operation go when they cannot be registered.
//
// An operation that the registration policy (registration_policy.h) runs registered
// must find every buffer registered on every rank. A buffer that is not (it lies across
// two pieces of the pool, in a classic segment, or in memory from elsewhere) is copied
// through a registered staging area of the communicator's own: what the operation reads
// is copied in before it, what it writes is copied out after it, on the operation's
// stream. This is the plan of that area: one slot per buffer that needs one, a buffer
// named twice (in place) sharing its slot. Plain C++, so that it is tested anywhere.
#ifndef GENESIS_DISTRIBUTED_NCCL_STAGING_PLAN_H_
#define GENESIS_DISTRIBUTED_NCCL_STAGING_PLAN_H_

#include <cstddef>
#include <vector>

#include "absl/types/span.h"

namespace genesis::distributed::nccl_backend {

// One buffer of an operation, and whether it is registered already.
struct StagedBuffer {
  const void* data = nullptr;
  size_t bytes = 0;
  bool read = false;     // The operation reads it: copied in.
  bool written = false;  // The operation writes it: copied out.
  bool registered = false;
};

// A buffer's place in the staging area.
struct StagingSlot {
  size_t buffer = 0;  // Its index among the operation's buffers.
  size_t offset = 0;  // From the start of the area, a multiple of kStagingAlignment.
  bool copy_in = false;
  bool copy_out = false;
};

struct StagingPlan {
  std::vector<StagingSlot> slots;  // In the order of the buffers.
  size_t bytes = 0;                // The area the slots need.
};

// Slots are aligned as cudaMalloc aligns its memory.
inline constexpr size_t kStagingAlignment = 256;

// The slots for the buffers that are not registered and hold bytes. A buffer with the
// same data and size as an earlier one takes that one's slot (its copies combined), so
// that an in-place operation works in place on its slot. Empty when nothing needs one.
StagingPlan PlanStaging(absl::Span<const StagedBuffer> buffers);

}  // namespace genesis::distributed::nccl_backend

#endif  // GENESIS_DISTRIBUTED_NCCL_STAGING_PLAN_H_
