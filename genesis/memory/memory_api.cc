#include "genesis/memory/memory_api.h"

#include "genesis/core/status.h"
#include "genesis/memory/pool_registry.h"

namespace genesis::memory {
namespace {

// Applies `read` to the stats of the device's pool.
template <typename Read>
auto ReadStats(const Device& device, Read read)
    -> absl::StatusOr<decltype(read(std::declval<const MemoryStats&>()))> {
  GENESIS_ASSIGN_OR_RETURN(CachingAllocator * pool, PoolFor(device));
  return read(pool->Stats());
}

}  // namespace

absl::StatusOr<int64_t> memory_allocated(const Device& device) {
  return ReadStats(device, [](const MemoryStats& s) { return s.all.allocated_bytes.current; });
}

absl::StatusOr<int64_t> memory_cached(const Device& device) {
  return ReadStats(device, [](const MemoryStats& s) { return s.all.cached_bytes.current; });
}

absl::StatusOr<int64_t> memory_reserved(const Device& device) {
  return ReadStats(device, [](const MemoryStats& s) { return s.all.reserved_bytes.current; });
}

absl::StatusOr<int64_t> max_memory_allocated(const Device& device) {
  return ReadStats(device, [](const MemoryStats& s) { return s.all.allocated_bytes.peak; });
}

absl::StatusOr<int64_t> max_memory_cached(const Device& device) {
  return ReadStats(device, [](const MemoryStats& s) { return s.all.cached_bytes.peak; });
}

absl::StatusOr<std::map<std::string, int64_t>> memory_stats(const Device& device) {
  return ReadStats(device, [](const MemoryStats& s) { return s.ToMap(); });
}

absl::StatusOr<std::string> memory_summary(const Device& device) {
  GENESIS_ASSIGN_OR_RETURN(CachingAllocator * pool, PoolFor(device));
  return pool->Summary();
}

absl::StatusOr<std::vector<CachingAllocator::SegmentSnapshot>> memory_snapshot(
    const Device& device) {
  GENESIS_ASSIGN_OR_RETURN(CachingAllocator * pool, PoolFor(device));
  return pool->Snapshot();
}

absl::Status empty_cache(const Device& device) {
  GENESIS_ASSIGN_OR_RETURN(CachingAllocator * pool, PoolFor(device));
  return pool->EmptyCache();
}

absl::Status reset_memory_stats(const Device& device) {
  GENESIS_ASSIGN_OR_RETURN(CachingAllocator * pool, PoolFor(device));
  pool->ResetPeakStats();
  pool->ResetAccumulatedStats();
  return absl::OkStatus();
}

}  // namespace genesis::memory
