#include "genesis/memory/pool/oom_message.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "genesis/core/byte_size.h"
#include "genesis/memory/allocator_options.h"

namespace genesis::memory::pool_internal {
namespace {

// Figures here are never negative (the stats' invariants); FormatByteSize takes unsigned.
std::string Human(int64_t n) { return FormatByteSize(static_cast<uint64_t>(n)); }

std::string Bytes(int64_t n) { return absl::StrCat(n, " bytes (", Human(n), ")"); }

}  // namespace

std::string OomMessage(const OomFigures& f, const OomReason& why) {
  const char* label = f.kind == MemoryKind::kDevice       ? "CUDA OOM"
                      : f.kind == MemoryKind::kPinnedHost ? "pinned host OOM"
                                                          : "host OOM";
  const int64_t cached = f.cached;
  const int64_t largest = f.largest_free_block;
  const double fragmentation =
      cached > 0 ? std::max(0.0, 1.0 - static_cast<double>(largest) / cached) : 0.0;
  std::string msg = absl::StrFormat(
      "%s: %s (%s) could not allocate %s (rounded to %d bytes, needing at most %s "
      "from the backend). ",
      label, f.device, f.backend_name, Bytes(f.requested), f.size, Bytes(f.needed));
  absl::StrAppend(&msg, "This pool has ", Bytes(f.allocated), " allocated and ",
                  Bytes(f.reserved), " reserved; ");
  if (f.device_memory.ok()) {
    absl::StrAppend(&msg, "the device has ", Bytes(f.device_memory->free_bytes), " free of ",
                    Bytes(f.device_memory->total_bytes), " total. ");
  } else {
    absl::StrAppend(&msg, "the device's free and total memory are unknown (",
                    f.device_memory.status().message(), "). ");
  }
  absl::StrAppendFormat(&msg, "Largest free block: %s; fragmentation ratio %.2f. ",
                        Bytes(largest), fragmentation);
  if (why.limit_hit) {
    absl::StrAppendFormat(&msg,
                          "The limit hit was memory_fraction = %g, which caps this "
                          "pool at %s. ",
                          f.memory_fraction, Bytes(f.allowed_max));
  } else {
    absl::StrAppend(&msg, "The backend reported: ", why.backend_message, ". ");
  }
  std::vector<std::string> advice;
  if (why.limit_hit) {
    advice.push_back("raise memory_fraction if the device has room for more");
  }
  if (f.total_bytes > 0 && f.size > f.total_bytes) {
    advice.push_back("this single request is larger than the device's total memory");
  }
  if (fragmentation >= 0.5 && cached >= static_cast<int64_t>(f.size) &&
      largest < static_cast<int64_t>(f.size) && f.max_split_size == kNoLimit) {
    advice.push_back(absl::StrCat(
        "cached memory (", Human(cached),
        ") is fragmented into blocks too small for this request; setting "
        "max_split_size keeps large blocks from being split and can avoid this"));
  }
  advice.push_back("free tensors that are no longer needed or reduce the batch size");
  absl::StrAppend(&msg, "Advice: ", absl::StrJoin(advice, "; "), ".");
  return msg;
}

}  // namespace genesis::memory::pool_internal
