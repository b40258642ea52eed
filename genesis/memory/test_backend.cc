#include "genesis/memory/test_backend.h"

#include <sys/mman.h>

#include <memory>
#include <mutex>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

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
}

TestBackend::~TestBackend() {
  // Segments the pool never returned are a pool bug the test will see in the counters;
  // unmap them anyway so one failing test does not exhaust address space for the next.
  std::lock_guard<std::mutex> lock(state_->mu_);
  for (const auto& [ptr, bytes] : state_->live_) {
    munmap(reinterpret_cast<void*>(ptr), bytes);
  }
}

std::unique_ptr<TestBackend> TestBackend::FakeCuda(size_t capacity) {
  Options options;
  options.capacity = capacity;
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
  if (s.fail_next_ > 0) {
    --s.fail_next_;
    ++s.failed_allocs_;
    return s.fail_status_;
  }
  if (bytes > s.capacity_ || s.live_bytes_ > s.capacity_ - bytes) {
    ++s.failed_allocs_;
    return absl::ResourceExhaustedError(absl::StrCat(
        "TestBackend: ", bytes, " bytes requested with ", s.live_bytes_, " of ",
        s.capacity_, " bytes in use"));
  }
  void* ptr = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (ptr == MAP_FAILED) {
    ++s.failed_allocs_;
    return absl::ResourceExhaustedError(
        absl::StrCat("TestBackend: mmap of ", bytes, " bytes failed"));
  }
  ++s.segment_allocs_;
  s.live_bytes_ += bytes;
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
