#include "python/src/torch_allocator.h"

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "genesis/core/device.h"
#include "genesis/memory/alloc_config.h"
#include "genesis/memory/pool_registry.h"

namespace genesis::python {
namespace {

using memory::CachingAllocator;
using memory::StreamId;

constexpr int kMaxDevices = 64;

struct State {
  std::mutex mu;  // Guards provider, last_error and the first lookup of each pool.
  TorchPoolProvider provider;
  // Pools found so far (the hot path reads these without the lock).
  std::array<std::atomic<CachingAllocator*>, kMaxDevices> pools{};
  std::atomic<int64_t> errors{0};
  std::string last_error;
};

// Never destroyed: PyTorch may free tensors while the process exits.
State& GetState() {
  static State* state = new State;
  return *state;
}

absl::StatusOr<CachingAllocator*> Pool(int device) {
  if (device < 0 || device >= kMaxDevices) {
    return absl::OutOfRangeError(absl::StrCat("genesis.torch: CUDA device ", device,
                                              " is outside [0, ", kMaxDevices, ")"));
  }
  State& s = GetState();
  CachingAllocator* pool = s.pools[device].load(std::memory_order_acquire);
  if (pool != nullptr) return pool;
  std::lock_guard<std::mutex> lock(s.mu);
  absl::StatusOr<CachingAllocator*> found =
      s.provider ? s.provider(device) : memory::PoolFor(Device::Cuda(device));
  if (found.ok()) s.pools[device].store(*found, std::memory_order_release);
  return found;
}

void Record(const absl::Status& error) {
  State& s = GetState();
  std::lock_guard<std::mutex> lock(s.mu);
  s.errors.fetch_add(1, std::memory_order_relaxed);
  s.last_error = std::string(error.message());
}

StreamId Stream(void* stream) { return reinterpret_cast<StreamId>(stream); }

}  // namespace

void SetTorchPoolProvider(TorchPoolProvider provider) {
  State& s = GetState();
  std::lock_guard<std::mutex> lock(s.mu);
  s.provider = std::move(provider);
  for (auto& pool : s.pools) pool.store(nullptr, std::memory_order_relaxed);
  s.errors.store(0);
  s.last_error.clear();
}

}  // namespace genesis::python

using genesis::python::Pool;

extern "C" {

void* genesis_torch_malloc(size_t size, int device, void* stream) {
  if (size == 0) return nullptr;
  absl::StatusOr<genesis::memory::CachingAllocator*> pool = Pool(device);
  if (!pool.ok()) throw std::runtime_error(std::string(pool.status().message()));
  absl::StatusOr<void*> p = (*pool)->Allocate(size, genesis::python::Stream(stream));
  if (!p.ok()) throw std::runtime_error(std::string(p.status().message()));
  return *p;
}

void genesis_torch_free(void* ptr, size_t size, int device, void* stream) {
  if (ptr == nullptr) return;
  absl::StatusOr<genesis::memory::CachingAllocator*> pool = Pool(device);
  absl::Status freed = pool.ok() ? (*pool)->Free(ptr) : pool.status();
  if (!freed.ok()) {
    genesis::python::Record(absl::Status(
        freed.code(), absl::StrCat("genesis.torch: free of ", size, " bytes at 0x",
                                   absl::Hex(reinterpret_cast<uintptr_t>(ptr)), " on cuda:",
                                   device, ": ", freed.message())));
  }
}

void genesis_torch_record_stream(void* ptr, void* stream) {
  genesis::python::State& s = genesis::python::GetState();
  for (auto& slot : s.pools) {
    genesis::memory::CachingAllocator* pool = slot.load(std::memory_order_acquire);
    if (pool != nullptr && pool->Owns(ptr)) {
      const absl::Status recorded = pool->RecordStream(ptr, genesis::python::Stream(stream));
      if (!recorded.ok()) genesis::python::Record(recorded);
      return;
    }
  }
  genesis::python::Record(absl::InvalidArgumentError(absl::StrCat(
      "genesis.torch: record_stream of 0x", absl::Hex(reinterpret_cast<uintptr_t>(ptr)),
      ", which no genesis pool handed out")));
}

void genesis_torch_empty_cache() {
  for (auto& slot : genesis::python::GetState().pools) {
    genesis::memory::CachingAllocator* pool = slot.load(std::memory_order_acquire);
    if (pool == nullptr) continue;
    const absl::Status emptied = pool->EmptyCache();
    if (!emptied.ok()) genesis::python::Record(emptied);
  }
}

void genesis_torch_set_memory_fraction(double fraction, int device) {
  absl::StatusOr<genesis::memory::AllocConfig> config = genesis::memory::DefaultAllocConfig();
  absl::Status set = config.status();
  if (set.ok()) {
    config->options.memory_fraction = fraction;
    set = genesis::memory::SetDefaultAllocConfig(*config);
  }
  if (!set.ok()) {
    throw std::runtime_error(absl::StrCat(
        "genesis.torch: cannot set the memory fraction of cuda:", device, " to ", fraction,
        ": ", set.message(),
        " (genesis pools take it when made: pass conf='memory_fraction:...' to "
        "genesis.torch.use_as_allocator, or set GENESIS_ALLOC_CONF)"));
  }
}

int64_t genesis_torch_error_count() { return genesis::python::GetState().errors.load(); }

const char* genesis_torch_last_error() {
  genesis::python::State& s = genesis::python::GetState();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.last_error.c_str();
}

}  // extern "C"
