// A Backend for tests: host memory that can be told to run out or to fail, that counts
// what the pool does with it, and that can pretend to be another device.
//
// Pool behaviour that matters most happens when memory runs out (retry, release of
// cached segments, the OOM message) and is hard to provoke with real memory. TestBackend
// gives segments from anonymous mappings reserved without swap (MAP_NORESERVE), so a test
// can ask for gigabytes it never touches, and it enforces a capacity in bytes. It
// pretends to be whatever device and kind the test says (e.g. cuda:0 device memory), so
// the "CUDA OOM" path runs on any CPU. It also checks the pool's side of the Backend
// contract: every FreeSegment must name a live (pointer, size) pair; anything else is
// recorded as a violation that tests assert on. With Options::virtual_memory it also
// offers virtual memory (HostVirtualMemory, under the same capacity and failure
// injection), so pools over it use expandable segments. Useful to users' tests as well.
#ifndef GENESIS_MEMORY_TEST_BACKEND_H_
#define GENESIS_MEMORY_TEST_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "genesis/core/device.h"
#include "genesis/memory/allocator_options.h"
#include "genesis/memory/backend.h"
#include "genesis/memory/virtual_memory.h"

namespace genesis::memory {

class TestBackend : public Backend {
 public:
  struct Options {
    // Live bytes beyond this make AllocateSegment return ResourceExhausted.
    size_t capacity = kNoLimit;
    // What MemoryInfo reports as total; 0 means "capacity", or 1 TiB without one.
    size_t total_bytes = 0;
    Device device = Device::Cpu();
    MemoryKind kind = MemoryKind::kHost;
    // Power of two, at least 512. Mappings are page aligned, so at most the page size.
    size_t alignment = 4096;
    std::string name = "test backend";
    // Offer virtual memory (expandable segments) with this granularity.
    bool virtual_memory = false;
    size_t granularity = size_t{2} << 20;
    // Unmapped memory stays counted against the capacity (as memory on its way back
    // after CudaVirtualMemory::Unmap returned) until FinishUnmaps, a Map over it or one
    // that needs it, or Unreserve: the latest CUDA's unmapping thread can be, so that
    // tests see what must wait for it. AllocateSegment never waits for it.
    bool lazy_unmaps = false;
  };

  // Everything the backend counts. Shared, so a test can read it after the pool (which
  // owns the backend) is gone, e.g. to check that every segment was returned.
  class State {
   public:
    int64_t segment_allocs() const;
    int64_t segment_frees() const;
    int64_t failed_allocs() const;
    int64_t live_segments() const;
    // Bytes of live segments plus mapped virtual memory.
    size_t live_bytes() const;
    // Virtual memory: Map and Unmap calls that succeeded, bytes mapped now, and
    // reservations held now.
    int64_t map_calls() const;
    int64_t unmap_calls() const;
    size_t mapped_bytes() const;
    int64_t live_reservations() const;
    // Options::lazy_unmaps: bytes unmapped whose memory is not back yet.
    size_t pending_unmap_bytes() const;
    // Contract violations seen (a FreeSegment of an unknown pointer or with the wrong
    // size), one readable line each; empty when the pool behaved.
    std::vector<std::string> violations() const;

   private:
    friend class TestBackend;
    // Fails (injected failure, capacity) or adds `bytes` to live_bytes_. Needs mu_.
    absl::Status TakeLocked(size_t bytes, const char* what);
    // Gives back the memory of every pending unmap. Needs mu_.
    void FinishUnmapsLocked();
    mutable std::mutex mu_;
    int64_t segment_allocs_ = 0;
    int64_t segment_frees_ = 0;
    int64_t failed_allocs_ = 0;
    size_t live_bytes_ = 0;
    int64_t map_calls_ = 0;
    int64_t unmap_calls_ = 0;
    size_t mapped_bytes_ = 0;
    int64_t live_reservations_ = 0;
    std::vector<std::pair<uintptr_t, size_t>> pending_unmaps_;  // Lazy unmaps not back.
    size_t pending_unmap_bytes_ = 0;
    absl::flat_hash_map<uintptr_t, size_t> live_;
    std::vector<std::string> violations_;
    size_t capacity_ = kNoLimit;
    int fail_next_ = 0;
    absl::Status fail_status_;
  };

  explicit TestBackend(Options options);
  TestBackend() : TestBackend(Options()) {}
  ~TestBackend() override;

  // A backend that looks like cuda:0 device memory with `capacity` bytes, with virtual
  // memory (expandable segments) if `virtual_memory`.
  static std::unique_ptr<TestBackend> FakeCuda(size_t capacity = kNoLimit,
                                               bool virtual_memory = false);

  // The next `n` AllocateSegment (and virtual-memory Map) calls fail with `status` (by default ResourceExhausted,
  // which the pool treats as out of memory), whatever the capacity says.
  void FailNextAllocations(
      int n, absl::Status status = absl::ResourceExhaustedError("injected failure"));
  void set_capacity(size_t capacity);
  std::shared_ptr<const State> state() const { return state_; }

  // Fails (see above) or returns a fresh page-aligned mapping of `bytes`.
  absl::StatusOr<void*> AllocateSegment(size_t bytes) override;
  // Unmaps the segment, or records a violation if (ptr, bytes) is not a live segment.
  void FreeSegment(void* ptr, size_t bytes) override;
  // free = total - live bytes (never below 0).
  absl::StatusOr<BackendMemoryInfo> MemoryInfo() const override;

  Device device() const override { return options_.device; }
  MemoryKind kind() const override { return options_.kind; }
  size_t alignment() const override { return options_.alignment; }
  std::string_view name() const override { return options_.name; }
  // nullptr unless Options::virtual_memory; otherwise Map counts against the capacity
  // and obeys FailNextAllocations like AllocateSegment.
  VirtualMemory* virtual_memory() override { return vm_.get(); }

 private:
  class CountingVirtualMemory;

  Options options_;
  std::shared_ptr<State> state_;
  std::unique_ptr<VirtualMemory> vm_;
};

}  // namespace genesis::memory

#endif  // GENESIS_MEMORY_TEST_BACKEND_H_
