#include "genesis/memory/backend.h"

#include <string_view>

namespace genesis::memory {

std::string_view MemoryKindName(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kHost:
      return "host";
    case MemoryKind::kPinnedHost:
      return "pinned_host";
    case MemoryKind::kDevice:
      return "device";
  }
  return "unknown";
}

}  // namespace genesis::memory
