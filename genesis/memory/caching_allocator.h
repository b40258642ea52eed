// A device-agnostic caching memory pool: the allocator behind GPU, pinned-host and CPU
// tensor storage.
//
// Asking the driver (cudaMalloc) or the C library for memory on every tensor is slow and
// synchronising; a CachingAllocator asks its Backend for large segments, carves blocks
// out of them, and keeps freed blocks for reuse, like PyTorch's CUDACachingAllocator. It
// knows nothing of CUDA: the Backend supplies memory, and StreamEvents (optional) tells
// it when work on other streams that used a block has finished, so that a block is
// reused on another stream, or returned, only when that is safe.
//
//   GENESIS_ASSIGN_OR_RETURN(auto pool, CachingAllocator::Create(
//       std::make_unique<HostBackend>(), AllocatorOptions()));
//   GENESIS_ASSIGN_OR_RETURN(void* p, pool->Allocate(4096));
//   ...
//   GENESIS_RETURN_IF_ERROR(pool->Free(p));
//
// All methods are thread-safe. A cached small allocation and its free on the same
// thread take no pool-wide lock (see docs/memory_pool.md for the design and invariants).
// Large blocks live in expandable segments when the backend offers virtual memory (see
// virtual_memory.h and AllocatorOptions::expandable_segments): one address range per
// stream that grows in place, so that freed memory anywhere serves any later request.
// Errors are absl::Status: InvalidArgument for misuse (double free, foreign pointer,
// impossible size), ResourceExhausted when memory runs out, whatever the Backend or
// StreamEvents reported otherwise.
#ifndef GENESIS_MEMORY_CACHING_ALLOCATOR_H_
#define GENESIS_MEMORY_CACHING_ALLOCATOR_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "genesis/memory/allocator_options.h"
#include "genesis/memory/backend.h"
#include "genesis/memory/memory_stats.h"
#include "genesis/memory/observer.h"
#include "genesis/memory/segment_snapshot.h"
#include "genesis/memory/stream_events.h"

namespace genesis::memory {

class CachingAllocator {
 public:
  // The types of Snapshot() (segment_snapshot.h).
  using PoolKind = memory::PoolKind;
  using BlockState = memory::BlockState;
  using BlockSnapshot = memory::BlockSnapshot;
  using SegmentSnapshot = memory::SegmentSnapshot;

  // Validates `options` (InvalidArgument naming the bad value), reads the backend's
  // total memory (needed for memory_fraction and garbage_collection_threshold), and
  // reserves options.warm_up_sizes. FailedPrecondition if expandable_segments is kOn
  // and the backend has no virtual memory. `events` may be null for pools whose memory is only
  // used on the host; RecordStream then fails.
  static absl::StatusOr<std::unique_ptr<CachingAllocator>> Create(
      std::unique_ptr<Backend> backend, AllocatorOptions options,
      std::unique_ptr<StreamEvents> events = nullptr);

  // Returns every segment to the backend, first waiting for pending stream events.
  // Blocks still allocated are a caller bug; their memory goes back too.
  ~CachingAllocator();

  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // Returns a block of at least `bytes`, aligned to min(backend alignment,
  // block_rounding) (512 with the defaults), not overlapping any other live block,
  // usable by work on `stream` at once. 0 bytes gives a unique, non-null minimum block
  // (like malloc(0) in glibc), which must be freed like any other.
  // InvalidArgument (naming the size) if `bytes` cannot be rounded without overflow;
  // ResourceExhausted with a diagnostic message when memory runs out after the pool
  // released its cache and retried. The pool stays usable after any error.
  absl::StatusOr<void*> Allocate(size_t bytes, StreamId stream = kNoStream) {
    if (void* p = AllocateHot(bytes, stream)) [[likely]] return p;
    return AllocateOther(bytes, stream);
  }

  // Gives back a block from Allocate. nullptr is a no-op. InvalidArgument naming the
  // pointer for a double free, an interior pointer or a pointer this pool never gave.
  // If RecordStream named other streams, the block is reused or released only after
  // the work queued on them so far has finished.
  absl::Status Free(void* ptr) {
    if (FreeHot(ptr)) [[likely]] return absl::OkStatus();
    return FreeOther(ptr);
  }

  // Says that work on `stream` (besides the allocation stream) uses the block at `ptr`,
  // so that Free waits for it. InvalidArgument if `ptr` is not a live block;
  // FailedPrecondition if the pool has no StreamEvents.
  absl::Status RecordStream(void* ptr, StreamId stream);

  // The block size (after rounding) of the live allocation starting at `ptr`; 0 if
  // `ptr` is not one.
  size_t AllocationSize(const void* ptr) const;
  // True if `ptr` is the start of a live allocation of this pool.
  bool Owns(const void* ptr) const;

  // Flushes the thread caches, retires completed stream events (without waiting for
  // any) and returns every segment that is entirely free to the backend, and, in
  // expandable segments, every free chunk (a granule of virtual memory not shared with
  // a live block). Segments holding blocks that still wait on events stay; Compact()
  // waits for them.
  absl::Status EmptyCache();
  // Like EmptyCache, but first waits for every pending stream event, so that after it
  // the pool reserves only segments holding live allocations. (Free neighbours are
  // always merged at once, so there is nothing else to compact.)
  absl::Status Compact();
  // Allocates blocks of `sizes` at once on `stream`, then frees them, so that their
  // segments are reserved before the first real request. Returns the first error.
  absl::Status WarmUp(absl::Span<const size_t> sizes, StreamId stream = kNoStream);

  // Exact whenever no call is in flight; during calls each figure is a recent value.
  MemoryStats Stats() const;
  // Sets every peak to its current value.
  void ResetPeakStats();
  // Zeroes the running totals (allocated/freed of every gauge) and the event counters;
  // current levels and num_segments stay.
  void ResetAccumulatedStats();

  // Every segment and its blocks, in address order.
  std::vector<SegmentSnapshot> Snapshot() const;
  // A readable table like torch.cuda.memory_summary(): allocated, active, reserved,
  // inactive split and requested memory, current / peak / total allocated / total
  // freed, plus the counters.
  std::string Summary() const;

  // Observers see events after this returns; adding one twice reports events twice.
  void AddObserver(std::shared_ptr<AllocatorObserver> observer);
  // Removes every registration of `observer`; events already being reported on other
  // threads may still reach it.
  void RemoveObserver(const AllocatorObserver* observer);

  const Backend& backend() const;
  const AllocatorOptions& options() const;
  // True if large blocks live in expandable segments.
  bool expandable_segments() const;

  // Validation used by Create, exposed for configuration front ends (alloc_config).
  static absl::Status ValidateOptions(const AllocatorOptions& options);

  class Impl;

 private:
  explicit CachingAllocator(std::unique_ptr<Impl> impl);

  // The commonest pair, allocating again the block this thread freed last and freeing
  // it (docs/memory_pool.md), in functions that call no other and return in registers:
  // the block, or nullptr to go on with AllocateOther; true if freed, else go on with
  // FreeOther. Allocate and Free, inline, try them first.
  void* AllocateHot(size_t bytes, StreamId stream);
  bool FreeHot(void* ptr);
  // Every other allocation and free.
  absl::StatusOr<void*> AllocateOther(size_t bytes, StreamId stream);
  absl::Status FreeOther(void* ptr);

  std::unique_ptr<Impl> impl_;
};

}  // namespace genesis::memory

#endif  // GENESIS_MEMORY_CACHING_ALLOCATOR_H_
