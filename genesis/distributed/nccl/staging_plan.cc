#include "genesis/distributed/nccl/staging_plan.h"

namespace genesis::distributed::nccl_backend {

StagingPlan PlanStaging(absl::Span<const StagedBuffer> buffers) {
  StagingPlan plan;
  for (size_t i = 0; i < buffers.size(); ++i) {
    const StagedBuffer& b = buffers[i];
    if (b.registered || b.data == nullptr || b.bytes == 0) continue;
    StagingSlot* same = nullptr;
    for (StagingSlot& slot : plan.slots) {
      const StagedBuffer& other = buffers[slot.buffer];
      if (other.data == b.data && other.bytes == b.bytes) same = &slot;
    }
    if (same != nullptr) {
      same->copy_in |= b.read;
      same->copy_out |= b.written;
      plan.slots.push_back({i, same->offset, false, false});
      continue;
    }
    plan.slots.push_back({i, plan.bytes, b.read, b.written});
    plan.bytes += (b.bytes + kStagingAlignment - 1) / kStagingAlignment * kStagingAlignment;
  }
  return plan;
}

}  // namespace genesis::distributed::nccl_backend
