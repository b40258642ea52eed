// The memory API of the Genesis documents, by its names: statistics and control of the
// pool of one device (the host pool for Device::Cpu(), the device pool for cuda:N).
//
//   GENESIS_ASSIGN_OR_RETURN(int64_t used, memory_allocated(Device::Cuda(0)));
//   std::cout << memory_summary(Device::Cuda(0)).value();
//
// Each function reaches the device's pool through PoolFor (pool_registry.h), creating it
// on first use, and returns PoolFor's error for a device that does not exist here (or
// in the CPU-only build). Figures are exact whenever no allocation or free is in flight.
#ifndef GENESIS_MEMORY_MEMORY_API_H_
#define GENESIS_MEMORY_MEMORY_API_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "genesis/core/device.h"
#include "genesis/memory/caching_allocator.h"

namespace genesis::memory {

// Bytes in blocks handed out and not yet freed.
absl::StatusOr<int64_t> memory_allocated(const Device& device);
// Bytes reserved from the backend but not handed out (reserved - allocated).
absl::StatusOr<int64_t> memory_cached(const Device& device);
// Bytes reserved from the backend (allocated + cached).
absl::StatusOr<int64_t> memory_reserved(const Device& device);
// Peaks of allocated and cached bytes since creation or reset_memory_stats.
absl::StatusOr<int64_t> max_memory_allocated(const Device& device);
absl::StatusOr<int64_t> max_memory_cached(const Device& device);
// Every statistic by name ("allocated_bytes.all.current", "num_cache_hits", ...; the
// README lists them).
absl::StatusOr<std::map<std::string, int64_t>> memory_stats(const Device& device);
// A readable table of the statistics, like torch.cuda.memory_summary().
absl::StatusOr<std::string> memory_summary(const Device& device);
// Every segment and block: address, size, state, stream.
absl::StatusOr<std::vector<CachingAllocator::SegmentSnapshot>> memory_snapshot(
    const Device& device);
// Returns every fully free cached segment to the backend.
absl::Status empty_cache(const Device& device);
// Resets peaks to current values and zeroes the accumulated counters.
absl::Status reset_memory_stats(const Device& device);

}  // namespace genesis::memory

#endif  // GENESIS_MEMORY_MEMORY_API_H_
