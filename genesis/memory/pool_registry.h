// The process's memory pools: one per CUDA device, one for pinned host memory and one
// for plain host memory, each created on first use and alive until the process exits.
//
//   GENESIS_ASSIGN_OR_RETURN(CachingAllocator* pool, PoolFor(Device::Cuda(1)));
//   GENESIS_ASSIGN_OR_RETURN(void* p, pool->Allocate(bytes, stream));
//
// Pools take their settings from GENESIS_ALLOC_CONF (alloc_config.h), or from
// SetDefaultAllocConfig when that is called before the first pool is made. All functions
// are thread-safe; returned pools are never destroyed, so pointers to them stay valid.
//
// Cached memory goes back to the devices and the system when the process exits (a
// handler registered when the first pool is made, after CUDA has started, so it runs
// before CUDA shuts down), or earlier through ReleaseCachedMemory: so that tools such as
// compute-sanitizer's leak check see only what a program still holds.
#ifndef GENESIS_MEMORY_POOL_REGISTRY_H_
#define GENESIS_MEMORY_POOL_REGISTRY_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "genesis/core/device.h"
#include "genesis/memory/alloc_config.h"
#include "genesis/memory/caching_allocator.h"

namespace genesis::memory {

class CudaVirtualMemory;

// The pool of `device`: the host pool for the CPU, the device pool for cuda:N. Errors:
// OutOfRange for a CUDA device that does not exist, FailedPrecondition in the CPU-only
// build, InvalidArgument if GENESIS_ALLOC_CONF does not parse (the error says where).
absl::StatusOr<CachingAllocator*> PoolFor(const Device& device);

// The virtual memory behind the expandable segments of cuda:`device`'s pool (the pool
// is made if it does not exist yet), for layers above the pool that follow its physical
// pieces (cuda_virtual_memory.h: listeners, PieceContaining); nullptr when that pool
// puts no blocks in expandable segments. Errors as for PoolFor. Include
// genesis/memory/cuda_virtual_memory.h (a CUDA build's target) to use the result.
absl::StatusOr<CudaVirtualMemory*> DeviceVirtualMemory(int device);

// The pinned host pool (cudaHostAlloc, or cudaHostRegister with pinned_mode:register).
// Unavailable without a usable GPU; FailedPrecondition in the CPU-only build.
absl::StatusOr<CachingAllocator*> PinnedHostPool();

// The plain host pool (aligned host memory). Fails only if GENESIS_ALLOC_CONF is bad.
absl::StatusOr<CachingAllocator*> HostPool();

// True if `ptr` points into pinned host memory: memory of the pinned pool, or memory
// that CUDA reports as page-locked host memory (pinned by anyone). False for nullptr and
// in the CPU-only build.
bool IsPinned(const void* ptr);

// A new pool of its own for `device` (host memory for the CPU, cudaMalloc-backed with
// CUDA-event stream ordering for cuda:N) with `config`, outside the registry: for tools
// that compare configurations, such as trace replay. Errors as for PoolFor.
absl::StatusOr<std::unique_ptr<CachingAllocator>> CreatePool(const Device& device,
                                                            const AllocConfig& config);

// Gives every cached block of every pool in the registry back (each pool's Compact:
// thread caches flushed, pending stream events waited for, free segments freed and
// expandable memory unmapped). Live blocks stay; FailedPrecondition then names each
// pool that still holds some and how many bytes (the memory is still released where it
// can be). The first error of a pool otherwise.
absl::Status ReleaseCachedMemory();

// Settings for pools not yet created, instead of GENESIS_ALLOC_CONF. FailedPrecondition
// if a pool already exists (its settings cannot change under live blocks).
absl::Status SetDefaultAllocConfig(const AllocConfig& config);

// The settings the next pool made will get: SetDefaultAllocConfig's, else those of
// GENESIS_ALLOC_CONF (its InvalidArgument if it does not parse).
absl::StatusOr<AllocConfig> DefaultAllocConfig();

namespace internal {

// Implemented per build (cuda_pools.cc, cuda_pools_nocuda.cc).
absl::StatusOr<std::unique_ptr<CachingAllocator>> MakeDevicePool(int device,
                                                                 const AllocConfig& config);
absl::StatusOr<std::unique_ptr<CachingAllocator>> MakePinnedHostPool(const AllocConfig& config);
bool CudaReportsPinned(const void* ptr);

}  // namespace internal
}  // namespace genesis::memory

#endif  // GENESIS_MEMORY_POOL_REGISTRY_H_
