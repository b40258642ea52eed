// GENESIS_ALLOC_CONF: the settings of every memory pool of a process, as one string.
//
// The environment variable GENESIS_ALLOC_CONF (read by AllocConfigFromEnvironment) sets
// AllocatorOptions (allocator_options.h) and the pinned pool's PinnedMode without
// recompiling, like PyTorch's PYTORCH_CUDA_ALLOC_CONF:
//
//   GENESIS_ALLOC_CONF='max_split_size:256MiB, cache_limit:2GB, memory_fraction:0.8'
//
// Syntax: `key:value` entries separated by commas; spaces and tabs are allowed around
// keys, values, ':' and ','. Keys are lower case and case-sensitive; each may appear at
// most once; keys not given keep their defaults. An empty (or all-blank) string sets
// nothing. Sizes are byte counts as genesis/core/byte_size.h parses them: "4096",
// "64k", "512MiB", "1.5 GiB", "2GB"; units are case-insensitive, kB/MB/GB/TB/PB are
// powers of 1000, KiB/MiB/GiB/TiB/PiB and K/M/G/T/P powers of 1024.
//
// | key                          | value                                | default |
// | ---------------------------- | ------------------------------------ | ------- |
// | block_rounding               | size: a power of two, >= 512         | 512     |
// | small_size_limit             | size > 0                             | 1MiB    |
// | small_segment_size           | size > 0                             | 2MiB    |
// | large_segment_size           | size > 0                             | 20MiB   |
// | large_segment_threshold      | size > 0                             | 10MiB   |
// | large_segment_rounding       | size > 0                             | 2MiB    |
// | large_segment_max            | size > 0                             | 256MiB  |
// | roundup_power2_divisions     | 0, or a power of two <= 64           | 0       |
// | max_split_size               | size, or `none`                      | none    |
// | memory_fraction              | number in (0, 1]                     | 1       |
// | cache_limit                  | size, or `none`                      | none    |
// | garbage_collection_threshold | number in [0, 1] (0: off)            | 0       |
// | warm_up                      | sizes joined by '+', or `none`       | none    |
// | thread_cache_blocks          | integer in [0, 1024] (0: off)        | 8       |
// | thread_cache_bytes           | size > 0                             | 64MiB   |
// | adaptive_caching             | true, false, 1 or 0                  | true    |
// | expandable_segments          | auto, true, false, 1 or 0            | auto    |
// | expandable_piece_size        | size: a power of two, >= 2MiB        | 64MiB   |
// | expandable_min_piece         | size: a power of two, >= 2MiB        | 16MiB   |
// | expandable_piece_layout      | aligned or whole                     | aligned |
// | expandable_min_map           | size (0: what each request needs)    | 16MiB   |
// | pinned_mode                  | alloc or register                    | alloc   |
//
// What they mean:
//   block_rounding                every block size is a multiple of it.
//   small_size_limit              requests below it come from the small pool, packed
//                                 into segments of small_segment_size.
//   large_segment_size            large requests below large_segment_threshold share
//                                 segments of this size; larger requests get a segment
//                                 of their own, rounded up to large_segment_rounding.
//   large_segment_max             shared large segments grow with the pool up to this
//                                 size: a new one is an eighth of reserved memory
//                                 (a power of two), and requests below half of it
//                                 share it; at or below large_segment_size, segments
//                                 keep their fixed sizes, as in PyTorch.
//   roundup_power2_divisions      N > 0: sizes round up to one of N steps between
//                                 consecutive powers of two (as in PyTorch), so that
//                                 slightly varying sizes reuse the same blocks.
//   max_split_size                free blocks larger than this are never split.
//   memory_fraction               the pool never reserves more than this fraction of the
//                                 backend's total memory.
//   cache_limit                   at most this many bytes stay cached (reserved but not
//                                 allocated); beyond it, freed segments are returned.
//   garbage_collection_threshold  once reserved memory exceeds this fraction of the
//                                 allowed maximum, least recently used cached segments
//                                 are released before the backend is asked for more.
//   warm_up                       sizes allocated and freed once when a pool is created,
//                                 so that their segments are reserved ("64MiB+1GiB").
//   thread_cache_blocks           freed blocks each thread keeps per (size, stream) for
//                                 its next allocations, without the pool lock.
//   thread_cache_bytes            at most this many bytes in one thread's cache.
//   adaptive_caching              keep segments of sizes that recur; release the others
//                                 first.
//   expandable_segments           large blocks in one virtual address range per stream
//                                 that grows in place (auto: where the backend offers
//                                 virtual memory; true: required; false: classic
//                                 segments only).
//   expandable_piece_size         the largest piece of physical memory one map of an
//                                 expandable segment creates; larger pieces cost fewer
//                                 driver calls, memory goes back a whole piece at a time.
//   expandable_min_piece          aligned layout: neighbouring pieces of one map where
//                                 one is smaller than this join (up to
//                                 expandable_piece_size); 2MiB: the pure aligned cut
//                                 (most driver calls, memory goes back most closely).
//   expandable_piece_layout       aligned: pieces of power-of-two sizes aligned to
//                                 their size (memory goes back closely); whole: as few
//                                 pieces as fit, about one per map (fewest driver
//                                 calls; memory goes back where a whole piece is free).
//   expandable_min_map            the least one map of an expandable segment adds: a
//                                 request that needs less maps ahead, so later
//                                 requests land in the rest (fewer driver calls, a
//                                 little more idle memory at the peak).
//   pinned_mode                   how the pinned host pool gets memory: cudaHostAlloc
//                                 (alloc) or malloc + cudaHostRegister (register).
//
// A bad string is an error, never ignored: every error names the key, the value and the
// column (1-based) where the entry starts, and an unknown key lists the valid ones.

#ifndef GENESIS_MEMORY_ALLOC_CONFIG_H_
#define GENESIS_MEMORY_ALLOC_CONFIG_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "genesis/memory/allocator_options.h"
#include "genesis/memory/pinned_mode.h"

namespace genesis::memory {

// The environment variable AllocConfigFromEnvironment reads.
inline constexpr std::string_view kAllocConfEnvVar = "GENESIS_ALLOC_CONF";

// Everything GENESIS_ALLOC_CONF can set.
struct AllocConfig {
  AllocatorOptions options;
  // Used by the pinned host pool only.
  PinnedMode pinned_mode = PinnedMode::kAlloc;
};

// Parses `text` (the syntax of the file comment) on top of `base`: the result is `base`
// with the keys given in `text` replaced. Blank `text` returns `base`. InvalidArgument,
// naming the key, the value and the column, for an entry without ':', without a key or
// without a value, an empty entry (",,", a leading or trailing ','), an unknown key
// (listing the valid keys), a key given twice, and a value that does not parse or is out
// of the key's range. Checks each key on its own; whether the values fit together (say,
// small_size_limit <= small_segment_size) is for the allocator to check.
absl::StatusOr<AllocConfig> ParseAllocConfig(std::string_view text, AllocConfig base = {});

// ParseAllocConfig of the variable GENESIS_ALLOC_CONF on top of the defaults; the
// defaults when it is unset or blank. Its errors start with
// "GENESIS_ALLOC_CONF='<value>': ".
absl::StatusOr<AllocConfig> AllocConfigFromEnvironment();

// Every key of `config`, in the order of the table above, as "key:value" joined by
// ","; sizes exact ("256MiB", "1000"), unlimited sizes "none", numbers in their shortest
// exact form. For every config that ParseAllocConfig can produce,
// ParseAllocConfig(FormatAllocConfig(config)) gives `config` back, whatever the base.
std::string FormatAllocConfig(const AllocConfig& config);

}  // namespace genesis::memory

#endif  // GENESIS_MEMORY_ALLOC_CONFIG_H_
