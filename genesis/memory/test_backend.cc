#include "genesis/memory/test_backend.h"

#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include <memory>
#include <mutex>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "genesis/core/status.h"
#include "genesis/memory/host_virtual_memory.h"

namespace genesis::memory {

int64_t TestBackend::State::segment_allocs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return segment_allocs_;
}
int64_t TestBackend::State::segment_frees() const {
  std::lock_guard<std::mutex> lock(mu_);
  return segment_frees_;
}
int64_t TestBackend::State::failed_allocs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failed_allocs_;
}
int64_t TestBackend::State::live_segments() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(live_.size());
}
size_t TestBackend::State::live_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_bytes_;
}
int64_t TestBackend::State::map_calls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return map_calls_;
}
int64_t TestBackend::State::unmap_calls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return unmap_calls_;
}
size_t TestBackend::State::mapped_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return mapped_bytes_;
}
int64_t TestBackend::State::live_reservations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_reservations_;
}

// HostVirtualMemory under the backend's capacity, failure injection and counters.
class TestBackend::CountingVirtualMemory : public VirtualMemory {
 public:
  CountingVirtualMemory(std::unique_ptr<HostVirtualMemory> vm, std::shared_ptr<State> state,
                        bool lazy_unmaps)
      : vm_(std::move(vm)), state_(std::move(state)), lazy_unmaps_(lazy_unmaps) {}

  size_t granularity() const override { return vm_->granularity(); }

  absl::StatusOr<void*> Reserve(size_t bytes) override {
    absl::StatusOr<void*> base = vm_->Reserve(bytes);
    if (base.ok()) {
      std::lock_guard<std::mutex> lock(state_->mu_);
      ++state_->live_reservations_;
    }
    return base;
  }

  void Unreserve(void* base, size_t bytes) override {
    vm_->Unreserve(base, bytes);
    std::lock_guard<std::mutex> lock(state_->mu_);
    --state_->live_reservations_;
    state_->FinishUnmapsLocked();
  }

  absl::Status MapPieces(void* ptr, size_t bytes, const PieceCut& cut) override {
    State& s = *state_;
    {
      std::lock_guard<std::mutex> lock(s.mu_);
      const auto start = reinterpret_cast<uintptr_t>(ptr);
      bool over_pending = false;
      for (const auto& [p, n] : s.pending_unmaps_) {
        over_pending = over_pending || (p < start + bytes && start < p + n);
      }
      // A map over pending memory, or one that needs it, waits for it.
      const bool needs_pending = bytes > s.capacity_ || s.live_bytes_ > s.capacity_ - bytes;
      if (over_pending || needs_pending) s.FinishUnmapsLocked();
      if (absl::Status st = s.TakeLocked(bytes, "Map"); !st.ok()) return st;
    }
    absl::Status status = vm_->MapPieces(ptr, bytes, cut);
    std::lock_guard<std::mutex> lock(s.mu_);
    if (!status.ok()) {
      s.live_bytes_ -= bytes;
      ++s.failed_allocs_;
      return status;
    }
    ++s.map_calls_;
    s.mapped_bytes_ += bytes;
    return status;
  }

  std::pair<uintptr_t, uintptr_t> PieceAt(uintptr_t p) const override {
    return vm_->PieceAt(p);
  }

  absl::Status Unmap(void* ptr, size_t bytes) override {
    absl::Status status = vm_->Unmap(ptr, bytes);
    State& s = *state_;
    std::lock_guard<std::mutex> lock(s.mu_);
    if (!status.ok()) {
      s.violations_.push_back(std::string(status.message()));
      return status;
    }
    ++s.unmap_calls_;
    s.mapped_bytes_ -= bytes;
    if (lazy_unmaps_) {
      s.pending_unmaps_.emplace_back(reinterpret_cast<uintptr_t>(ptr), bytes);
      s.pending_unmap_bytes_ += bytes;
    } else {
      s.live_bytes_ -= bytes;
    }
    return status;
  }

  absl::Status FinishUnmaps() override {
    std::lock_guard<std::mutex> lock(state_->mu_);
    state_->FinishUnmapsLocked();
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<HostVirtualMemory> vm_;
  std::shared_ptr<State> state_;
  const bool lazy_unmaps_;
};

absl::Status TestBackend::State::TakeLocked(size_t bytes, const char* what) {
  if (fail_next_ > 0) {
    --fail_next_;
    ++failed_allocs_;
    return fail_status_;
  }
  if (bytes > capacity_ || live_bytes_ > capacity_ - bytes) {
    ++failed_allocs_;
    return absl::ResourceExhaustedError(absl::StrCat("TestBackend: ", what, " of ", bytes,
                                                     " bytes with ", live_bytes_, " of ",
                                                     capacity_, " bytes in use"));
  }
  live_bytes_ += bytes;
  return absl::OkStatus();
}
void TestBackend::State::FinishUnmapsLocked() {
  live_bytes_ -= pending_unmap_bytes_;
  pending_unmap_bytes_ = 0;
  pending_unmaps_.clear();
}

size_t TestBackend::State::pending_unmap_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_unmap_bytes_;
}

std::vector<std::string> TestBackend::State::violations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return violations_;
}

TestBackend::TestBackend(Options options)
    : options_(std::move(options)), state_(std::make_shared<State>()) {
  state_->capacity_ = options_.capacity;
  if (options_.total_bytes == 0) {
    options_.total_bytes =
        options_.capacity != kNoLimit ? options_.capacity : (size_t{1} << 40);
  }
  if (options_.virtual_memory) {
    absl::StatusOr<std::unique_ptr<HostVirtualMemory>> vm =
        HostVirtualMemory::Create(options_.granularity);
    // Only a bad granularity fails here: a test bug worth stopping for.
    if (!vm.ok()) {
      std::fprintf(stderr, "TestBackend: %s\n", std::string(vm.status().message()).c_str());
      std::abort();
    }
    vm_ = std::make_unique<CountingVirtualMemory>(*std::move(vm), state_,
                                                  options_.lazy_unmaps);
  }
}

TestBackend::~TestBackend() {
  // Segments the pool never returned are a pool bug the test will see in the counters;
  // unmap them anyway so one failing test does not exhaust address space for the next.
  std::lock_guard<std::mutex> lock(state_->mu_);
  for (const auto& [ptr, bytes] : state_->live_) {
    munmap(reinterpret_cast<void*>(ptr), bytes);
  }
}

std::unique_ptr<TestBackend> TestBackend::FakeCuda(size_t capacity, bool virtual_memory) {
  Options options;
  options.capacity = capacity;
  options.virtual_memory = virtual_memory;
  options.device = Device::Cuda(0);
  options.kind = MemoryKind::kDevice;
  options.name = "cuda:0 device (test backend)";
  return std::make_unique<TestBackend>(std::move(options));
}

void TestBackend::FailNextAllocations(int n, absl::Status status) {
  std::lock_guard<std::mutex> lock(state_->mu_);
  state_->fail_next_ = n;
  state_->fail_status_ = std::move(status);
}

void TestBackend::set_capacity(size_t capacity) {
  std::lock_guard<std::mutex> lock(state_->mu_);
  state_->capacity_ = capacity;
}

absl::StatusOr<void*> TestBackend::AllocateSegment(size_t bytes) {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mu_);
  if (bytes == 0) {
    return absl::InvalidArgumentError("TestBackend: segment of 0 bytes requested");
  }
  GENESIS_RETURN_IF_ERROR(s.TakeLocked(bytes, "AllocateSegment"));
  void* ptr = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (ptr == MAP_FAILED) {
    s.live_bytes_ -= bytes;
    ++s.failed_allocs_;
    return absl::ResourceExhaustedError(
        absl::StrCat("TestBackend: mmap of ", bytes, " bytes failed"));
  }
  ++s.segment_allocs_;
  s.live_[reinterpret_cast<uintptr_t>(ptr)] = bytes;
  return ptr;
}

void TestBackend::FreeSegment(void* ptr, size_t bytes) {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mu_);
  auto it = s.live_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == s.live_.end()) {
    s.violations_.push_back(absl::StrFormat(
        "FreeSegment(%p, %d): not a live segment", ptr, bytes));
    return;
  }
  if (it->second != bytes) {
    s.violations_.push_back(absl::StrFormat(
        "FreeSegment(%p, %d): segment was allocated with %d bytes", ptr, bytes,
        it->second));
    return;
  }
  munmap(ptr, bytes);
  s.live_bytes_ -= bytes;
  s.live_.erase(it);
  ++s.segment_frees_;
}

absl::StatusOr<BackendMemoryInfo> TestBackend::MemoryInfo() const {
  std::lock_guard<std::mutex> lock(state_->mu_);
  BackendMemoryInfo info;
  info.total_bytes = options_.total_bytes;
  info.free_bytes = state_->live_bytes_ < options_.total_bytes
                        ? options_.total_bytes - state_->live_bytes_
                        : 0;
  return info;
}

}  // namespace genesis::memory
