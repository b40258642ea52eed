#include "genesis/memory/pool/options_check.h"

#include <bit>
#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "genesis/core/absl_compat.h"
#include "genesis/core/status.h"
#include "genesis/memory/virtual_memory.h"

namespace genesis::memory::pool_internal {

absl::Status ValidateOptions(const AllocatorOptions& o) {
  auto bad = [](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("AllocatorOptions: ", what));
  };
  if (!std::has_single_bit(o.block_rounding) || o.block_rounding < 512) {
    return bad(absl::StrCat("block_rounding = ", o.block_rounding,
                            " must be a power of two >= 512"));
  }
  if (o.small_size_limit == 0 || o.small_size_limit % o.block_rounding != 0) {
    return bad(absl::StrCat("small_size_limit = ", o.small_size_limit,
                            " must be a positive multiple of block_rounding (",
                            o.block_rounding, ")"));
  }
  if (o.small_segment_size < o.small_size_limit ||
      o.small_segment_size % o.block_rounding != 0) {
    return bad(absl::StrCat("small_segment_size = ", o.small_segment_size,
                            " must be a multiple of block_rounding (", o.block_rounding,
                            ") and >= small_size_limit (", o.small_size_limit, ")"));
  }
  if (o.large_segment_threshold < o.small_size_limit) {
    return bad(absl::StrCat("large_segment_threshold = ", o.large_segment_threshold,
                            " must be >= small_size_limit (", o.small_size_limit, ")"));
  }
  if (o.large_segment_size < o.large_segment_threshold ||
      o.large_segment_size % o.block_rounding != 0) {
    return bad(absl::StrCat("large_segment_size = ", o.large_segment_size,
                            " must be a multiple of block_rounding (", o.block_rounding,
                            ") and >= large_segment_threshold (",
                            o.large_segment_threshold, ")"));
  }
  if (o.large_segment_max == 0 || o.large_segment_max % o.block_rounding != 0) {
    return bad(absl::StrCat("large_segment_max = ", o.large_segment_max,
                            " must be a positive multiple of block_rounding (",
                            o.block_rounding, ")"));
  }
  if (!std::has_single_bit(o.expandable_piece_size)) {
    return bad(absl::StrCat("expandable_piece_size = ", o.expandable_piece_size,
                            " must be a power of two"));
  }
  if (!std::has_single_bit(o.expandable_min_piece)) {
    return bad(absl::StrCat("expandable_min_piece = ", o.expandable_min_piece,
                            " must be a power of two"));
  }
  if (!std::has_single_bit(o.large_segment_rounding) ||
      o.large_segment_rounding < o.block_rounding) {
    return bad(absl::StrCat("large_segment_rounding = ", o.large_segment_rounding,
                            " must be a power of two >= block_rounding (",
                            o.block_rounding, ")"));
  }
  if (o.roundup_power2_divisions != 0 &&
      (o.roundup_power2_divisions < 0 || o.roundup_power2_divisions > 64 ||
       !std::has_single_bit(static_cast<size_t>(o.roundup_power2_divisions)))) {
    return bad(absl::StrCat("roundup_power2_divisions = ", o.roundup_power2_divisions,
                            " must be 0 or a power of two <= 64"));
  }
  if (o.max_split_size != kNoLimit && o.max_split_size < o.small_size_limit) {
    return bad(absl::StrCat("max_split_size = ", o.max_split_size,
                            " must be unlimited or >= small_size_limit (",
                            o.small_size_limit, ")"));
  }
  if (!(o.memory_fraction > 0.0 && o.memory_fraction <= 1.0)) {
    return bad(absl::StrCat("memory_fraction = ", o.memory_fraction,
                            " must be in (0, 1]"));
  }
  if (!(o.garbage_collection_threshold >= 0.0 && o.garbage_collection_threshold <= 1.0)) {
    return bad(absl::StrCat("garbage_collection_threshold = ",
                            o.garbage_collection_threshold,
                            " must be 0 (off) or in (0, 1]"));
  }
  if (o.thread_cache_blocks < 0) {
    return bad(absl::StrCat("thread_cache_blocks = ", o.thread_cache_blocks,
                            " must be >= 0"));
  }
  return absl::OkStatus();
}

absl::Status CheckBackend(Backend& backend, const AllocatorOptions& options) {
  if (options.expandable_segments == ExpandableSegments::kOn &&
      backend.virtual_memory() == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "CachingAllocator::Create: expandable_segments is on, but backend ",
        ToAbsl(backend.name()), " has no virtual memory"));
  }
  if (const VirtualMemory* vm = backend.virtual_memory();
      vm != nullptr && options.expandable_segments != ExpandableSegments::kOff &&
      (!std::has_single_bit(vm->granularity()) ||
       vm->granularity() < options.block_rounding)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CachingAllocator::Create: backend ", ToAbsl(backend.name()),
        " has virtual memory granularity ", vm->granularity(),
        "; expandable segments need a power of two >= block_rounding"));
  }
  if (!std::has_single_bit(backend.alignment()) || backend.alignment() < 512) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CachingAllocator::Create: backend ", ToAbsl(backend.name()), " has alignment ",
        backend.alignment(), "; the pool needs a power of two >= 512"));
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> TotalBytes(const Backend& backend, const AllocatorOptions& options) {
  absl::StatusOr<BackendMemoryInfo> info = backend.MemoryInfo();
  if (info.ok()) return info->total_bytes;
  if (options.memory_fraction < 1.0 || options.garbage_collection_threshold > 0) {
    return Annotate(info.status(),
                    "CachingAllocator::Create: memory_fraction and "
                    "garbage_collection_threshold need the backend's total memory");
  }
  return 0;
}

}  // namespace genesis::memory::pool_internal
