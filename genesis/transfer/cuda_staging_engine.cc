#include "genesis/transfer/cuda_staging_engine.h"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"
#include "genesis/core/status.h"
#include "genesis/cuda/device_guard.h"
#include "genesis/cuda/device_query.h"
#include "genesis/cuda/internal/check.h"

namespace genesis::transfer {

absl::StatusOr<std::unique_ptr<CudaStagingEngine>> CudaStagingEngine::Create(int device,
                                                                             int num_slots) {
  GENESIS_RETURN_IF_ERROR(cuda::CheckDeviceIndex(device));
  if (num_slots < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("CudaStagingEngine needs at least one slot, got ", num_slots));
  }
  GENESIS_ASSIGN_OR_RETURN(cuda::DeviceGuard guard, cuda::DeviceGuard::Create(device));
  std::unique_ptr<CudaStagingEngine> engine(new CudaStagingEngine(device));
  GENESIS_CUDA_RETURN_IF_ERROR_ON(
      device, cudaStreamCreateWithFlags(&engine->stream_, cudaStreamNonBlocking));
  for (int i = 0; i < num_slots; ++i) {
    cudaEvent_t event = nullptr;
    GENESIS_CUDA_RETURN_IF_ERROR_ON(
        device, cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    engine->events_.push_back(event);
  }
  engine->recorded_.assign(num_slots, false);
  return engine;
}

CudaStagingEngine::~CudaStagingEngine() {
  cuda::internal::BestEffortDeviceSwitch use(device_);
  if (stream_ != nullptr) cuda::IgnoreCudaError(cudaStreamSynchronize(stream_));
  for (cudaEvent_t event : events_) cuda::IgnoreCudaError(cudaEventDestroy(event));
  if (stream_ != nullptr) cuda::IgnoreCudaError(cudaStreamDestroy(stream_));
}

absl::Status CudaStagingEngine::CheckSlot(int slot) const {
  if (slot >= 0 && slot < static_cast<int>(events_.size())) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("staging slot ", slot, " outside 0..",
                                                 events_.size() - 1));
}

absl::StatusOr<void*> CudaStagingEngine::AllocateStaging(size_t bytes) {
  GENESIS_ASSIGN_OR_RETURN(cuda::DeviceGuard guard, cuda::DeviceGuard::Create(device_));
  void* p = nullptr;
  GENESIS_CUDA_RETURN_IF_ERROR_ON(device_, cudaHostAlloc(&p, bytes, cudaHostAllocDefault));
  return p;
}

void CudaStagingEngine::FreeStaging(void* p) {
  cuda::internal::BestEffortDeviceSwitch use(device_);
  cuda::IgnoreCudaError(cudaFreeHost(p));
}

absl::Status CudaStagingEngine::CopyAsync(void* dst, const void* src, size_t bytes,
                                          int slot) {
  GENESIS_RETURN_IF_ERROR(CheckSlot(slot));
  GENESIS_ASSIGN_OR_RETURN(cuda::DeviceGuard guard, cuda::DeviceGuard::Create(device_));
  GENESIS_CUDA_RETURN_IF_ERROR_ON(
      device_, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_));
  return absl::OkStatus();
}

absl::Status CudaStagingEngine::Record(int slot) {
  GENESIS_RETURN_IF_ERROR(CheckSlot(slot));
  GENESIS_ASSIGN_OR_RETURN(cuda::DeviceGuard guard, cuda::DeviceGuard::Create(device_));
  GENESIS_CUDA_RETURN_IF_ERROR_ON(device_, cudaEventRecord(events_[slot], stream_));
  recorded_[slot] = true;
  return absl::OkStatus();
}

absl::Status CudaStagingEngine::Wait(int slot) {
  GENESIS_RETURN_IF_ERROR(CheckSlot(slot));
  if (!recorded_[slot]) return absl::OkStatus();
  GENESIS_CUDA_RETURN_IF_ERROR_ON(device_, cudaEventSynchronize(events_[slot]));
  return absl::OkStatus();
}

namespace {

struct SharedPipelines {
  std::mutex mu;
  std::map<int, absl::StatusOr<std::unique_ptr<StagingPipeline>>> by_device;
};

// Never destroyed itself (a call from another static destructor must still find it);
// the pipelines go at exit, through ReleaseSharedPipelines.
SharedPipelines& Shared() {
  static auto* const shared = new SharedPipelines;
  return *shared;
}

void ReleaseSharedPipelines() {
  SharedPipelines& shared = Shared();
  std::lock_guard<std::mutex> lock(shared.mu);
  shared.by_device.clear();  // Each pipeline waits for its copies and frees its buffers.
}

}  // namespace

absl::StatusOr<StagingPipeline*> SharedStagingPipeline(int device) {
  GENESIS_RETURN_IF_ERROR(cuda::CheckDeviceIndex(device));
  SharedPipelines& shared = Shared();
  std::lock_guard<std::mutex> lock(shared.mu);
  auto it = shared.by_device.find(device);
  if (it == shared.by_device.end()) {
    const StagingPipeline::Options options;
    absl::StatusOr<std::unique_ptr<StagingPipeline>> pipeline =
        [&]() -> absl::StatusOr<std::unique_ptr<StagingPipeline>> {
      GENESIS_ASSIGN_OR_RETURN(std::unique_ptr<CudaStagingEngine> engine,
                               CudaStagingEngine::Create(device, options.num_buffers));
      return StagingPipeline::Create(std::move(engine), options);
    }();
    it = shared.by_device.emplace(device, std::move(pipeline)).first;
    // Registered after CUDA started (creating the engine did), so that the handler runs
    // before CUDA's own and can still free pinned memory.
    static const bool registered = std::atexit(ReleaseSharedPipelines) == 0;
    (void)registered;
  }
  if (!it->second.ok()) return it->second.status();
  return it->second->get();
}

}  // namespace genesis::transfer
