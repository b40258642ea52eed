#include "genesis/memory/pool_registry.h"

#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "genesis/core/byte_size.h"
#include "genesis/core/status.h"
#include "genesis/cuda/device_query.h"
#include "genesis/memory/host_backend.h"

namespace genesis::memory {
namespace {

struct Registry {
  std::mutex mu;
  std::optional<AllocConfig> config;  // Read from the environment at the first pool.
  bool any_pool = false;
  std::unique_ptr<CachingAllocator> host;
  std::unique_ptr<CachingAllocator> pinned;
  std::vector<std::unique_ptr<CachingAllocator>> devices;
};

// Leaked on purpose: pools outlive every static destructor that might still free.
Registry& GetRegistry() {
  static Registry* registry = new Registry;
  return *registry;
}

absl::StatusOr<AllocConfig> ConfigLocked(Registry& r) {
  if (!r.config.has_value()) {
    GENESIS_ASSIGN_OR_RETURN(AllocConfig config, AllocConfigFromEnvironment());
    r.config = config;
  }
  return *r.config;
}

void ReleaseAtExit() { ReleaseCachedMemory().IgnoreError(); }

// Creates the pool in `slot` on first use with `make(config)`. The first pool registers
// the exit handler: after `make`, which started CUDA for a device or pinned pool, so
// the handler runs before CUDA's own (handlers run in reverse order).
template <typename Make>
absl::StatusOr<CachingAllocator*> GetOrCreate(Registry& r, std::unique_ptr<CachingAllocator>& slot,
                                              Make make) {
  if (slot == nullptr) {
    GENESIS_ASSIGN_OR_RETURN(AllocConfig config, ConfigLocked(r));
    GENESIS_ASSIGN_OR_RETURN(slot, make(config));
    r.any_pool = true;
    static const bool registered = std::atexit(ReleaseAtExit) == 0;
    (void)registered;
  }
  return slot.get();
}

}  // namespace

absl::StatusOr<std::unique_ptr<CachingAllocator>> CreatePool(const Device& device,
                                                            const AllocConfig& config) {
  if (device.is_cpu()) {
    return CachingAllocator::Create(std::make_unique<HostBackend>(), config.options);
  }
  GENESIS_RETURN_IF_ERROR(cuda::CheckDeviceExists(device));
  return internal::MakeDevicePool(device.index(), config);
}

absl::StatusOr<CachingAllocator*> HostPool() {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  return GetOrCreate(r, r.host,
                     [](const AllocConfig& config) { return CreatePool(Device::Cpu(), config); });
}

absl::StatusOr<CachingAllocator*> PinnedHostPool() {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  return GetOrCreate(r, r.pinned, internal::MakePinnedHostPool);
}

absl::StatusOr<CachingAllocator*> PoolFor(const Device& device) {
  if (device.is_cpu()) return HostPool();
  GENESIS_RETURN_IF_ERROR(cuda::CheckDeviceExists(device));
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.devices.empty()) r.devices.resize(cuda::DeviceCount());
  return GetOrCreate(r, r.devices[device.index()],
                     [&](const AllocConfig& config) { return CreatePool(device, config); });
}

bool IsPinned(const void* ptr) {
  if (ptr == nullptr) return false;
  {
    Registry& r = GetRegistry();
    std::lock_guard<std::mutex> lock(r.mu);
    if (r.pinned != nullptr && r.pinned->Owns(ptr)) return true;
  }
  return internal::CudaReportsPinned(ptr);
}

absl::Status ReleaseCachedMemory() {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::pair<std::string, CachingAllocator*>> pools;
  if (r.host != nullptr) pools.emplace_back("host", r.host.get());
  if (r.pinned != nullptr) pools.emplace_back("pinned host", r.pinned.get());
  for (size_t i = 0; i < r.devices.size(); ++i) {
    if (r.devices[i] != nullptr) pools.emplace_back(absl::StrCat("cuda:", i), r.devices[i].get());
  }
  absl::Status first;
  std::vector<std::string> live;
  for (const auto& [name, pool] : pools) {
    absl::Status s = pool->Compact();
    if (!s.ok() && first.ok()) first = Annotate(s, absl::StrCat("releasing the ", name, " pool"));
    const int64_t allocated = pool->Stats().all.allocated_bytes.current;
    if (allocated > 0) {
      live.push_back(absl::StrCat(name, ": ", FormatByteSize(allocated), " in live blocks"));
    }
  }
  if (!first.ok()) return first;
  if (!live.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "ReleaseCachedMemory: cached memory released; still allocated: ",
        absl::StrJoin(live, "; ")));
  }
  return absl::OkStatus();
}

absl::Status SetDefaultAllocConfig(const AllocConfig& config) {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.any_pool) {
    return absl::FailedPreconditionError(
        "SetDefaultAllocConfig: a memory pool already exists; call it before the first "
        "allocation");
  }
  GENESIS_RETURN_IF_ERROR(CachingAllocator::ValidateOptions(config.options));
  r.config = config;
  return absl::OkStatus();
}

absl::StatusOr<AllocConfig> DefaultAllocConfig() {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  return ConfigLocked(r);
}

}  // namespace genesis::memory
