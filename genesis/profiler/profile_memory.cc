#include "genesis/profiler/profile_memory.h"

#include <utility>

#include "absl/strings/match.h"
#include "genesis/core/device.h"
#include "genesis/cuda/device_query.h"
#include "genesis/memory/pool_registry.h"
#include "genesis/profiler/chrome_trace.h"
#include "genesis/profiler/replay_export.h"
#include "genesis/profiler/torch_snapshot.h"

namespace genesis::profiler {
namespace {

absl::StatusOr<std::vector<PoolToWatch>> DefaultPools() {
  std::vector<PoolToWatch> pools;
  absl::StatusOr<memory::CachingAllocator*> host = memory::HostPool();
  if (!host.ok()) return host.status();
  pools.push_back({*host, "cpu", "host"});
  const int gpus = cuda::DeviceCount();
  for (int i = 0; i < gpus; ++i) {
    const Device device = Device::Cuda(i);
    absl::StatusOr<memory::CachingAllocator*> pool = memory::PoolFor(device);
    if (!pool.ok()) return pool.status();
    pools.push_back({*pool, device.ToString(), "device"});
  }
  if (gpus > 0) {
    absl::StatusOr<memory::CachingAllocator*> pinned = memory::PinnedHostPool();
    if (pinned.ok()) pools.push_back({*pinned, "cpu", "pinned"});
  }
  return pools;
}

absl::Status NotStarted() {
  return absl::FailedPreconditionError("ProfileMemory: not started (call Start first)");
}

}  // namespace

ProfileMemory::ProfileMemory(ProfileMemoryOptions options) : options_(std::move(options)) {}

ProfileMemory::~ProfileMemory() {
  if (running()) (void)recorder_->Stop();
}

absl::Status ProfileMemory::Start() {
  if (recorder_ != nullptr) {
    return absl::FailedPreconditionError(
        "ProfileMemory: started twice (a scope records once; make a new one)");
  }
  absl::StatusOr<std::unique_ptr<Recorder>> recorder = Recorder::Create(options_.recorder);
  if (!recorder.ok()) return recorder.status();
  std::vector<PoolToWatch> pools = options_.pools;
  if (pools.empty()) {
    absl::StatusOr<std::vector<PoolToWatch>> defaults = DefaultPools();
    if (!defaults.ok()) return defaults.status();
    pools = std::move(*defaults);
  }
  for (const PoolToWatch& p : pools) {
    if (absl::Status s = (*recorder)->Attach(p.pool, p.device, p.name); !s.ok()) return s;
  }
  recorder_ = std::move(*recorder);
  return absl::OkStatus();
}

absl::Status ProfileMemory::Stop() {
  if (recorder_ == nullptr) return NotStarted();
  if (recorder_->stopped()) {
    return absl::FailedPreconditionError("ProfileMemory: stopped twice");
  }
  return recorder_->Stop();
}

bool ProfileMemory::running() const { return recorder_ != nullptr && !recorder_->stopped(); }

void ProfileMemory::Mark(std::string_view name) {
  if (running()) recorder_->Mark(name);
}

absl::StatusOr<History> ProfileMemory::Collect() const {
  if (recorder_ == nullptr) return NotStarted();
  return recorder_->Collect();
}

absl::StatusOr<MemorySummary> ProfileMemory::Summary() const {
  absl::StatusOr<History> h = Collect();
  if (!h.ok()) return h.status();
  return Summarize(*h);
}

absl::StatusOr<LeakReport> ProfileMemory::CheckMemoryLeaks() const {
  absl::StatusOr<History> h = Collect();
  if (!h.ok()) return h.status();
  return profiler::CheckMemoryLeaks(*h);
}

absl::StatusOr<std::vector<LiveAllocation>> ProfileMemory::LargeAllocations(
    uint64_t min_bytes) const {
  absl::StatusOr<History> h = Collect();
  if (!h.ok()) return h.status();
  return profiler::LargeAllocations(*h, min_bytes);
}

absl::Status ProfileMemory::WriteChromeTrace(const std::string& path) const {
  absl::StatusOr<History> h = Collect();
  if (!h.ok()) return h.status();
  return profiler::WriteChromeTrace(*h, path);
}

absl::Status ProfileMemory::WriteTorchSnapshot(const std::string& path) const {
  absl::StatusOr<History> h = Collect();
  if (!h.ok()) return h.status();
  if (absl::EndsWith(path, ".pickle") || absl::EndsWith(path, ".pkl")) {
    return WriteTorchSnapshotPickle(*h, path);
  }
  return WriteTorchSnapshotJson(*h, path);
}

absl::Status ProfileMemory::WriteReplayTrace(const std::string& path, int source) const {
  absl::StatusOr<History> h = Collect();
  if (!h.ok()) return h.status();
  return profiler::WriteReplayTrace(*h, path, source);
}

absl::Status ProfileMemory::WritePicture(const std::string& path,
                                         const PictureOptions& options) const {
  absl::StatusOr<History> h = Collect();
  if (!h.ok()) return h.status();
  return profiler::WritePicture(*h, path, options);
}

}  // namespace genesis::profiler
