#include "genesis/memory/pool/pointer_errors.h"

#include <atomic>
#include <cstdint>

#include "absl/strings/str_format.h"
#include "genesis/core/absl_compat.h"
#include "genesis/memory/pool/block.h"

namespace genesis::memory::pool_internal {

absl::Status BadPointerError(const SegmentMap& segments, const void* ptr, const char* what,
                             std::string_view backend_name) {
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  if (const Segment* s = segments.Containing(ptr); s != nullptr) {
    for (const Block* b = s->head; b != nullptr; b = b->next) {
      const auto bstart = reinterpret_cast<uintptr_t>(b->ptr);
      if (p < bstart || p >= bstart + b->size) continue;
      const State state = b->state.load(std::memory_order_relaxed);
      if (p == bstart && state != State::kAllocated) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s(%p): double free: the block of %d bytes at %p is already free", what, ptr,
            b->size, ptr));
      }
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s(%p): not the start of a live allocation: it lies %d bytes into a%s "
          "block of %d bytes at %p (an interior pointer, or a block already freed "
          "and merged with its neighbour)",
          what, ptr, p - bstart, state == State::kAllocated ? "n allocated" : " free",
          b->size, static_cast<const void*>(b->ptr)));
    }
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("%s(%p): pointer was not allocated by this pool (%s)", what, ptr,
                      ToAbsl(backend_name)));
}

}  // namespace genesis::memory::pool_internal
