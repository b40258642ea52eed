// The CUDA StagingEngine (staging.h): pinned staging buffers from cudaHostAlloc, copies
// with cudaMemcpyAsync on a stream of the engine's own, and one CUDA event per staging
// buffer. With it a StagingPipeline moves pageable host memory to and from a GPU.
//
//   GENESIS_ASSIGN_OR_RETURN(auto engine, CudaStagingEngine::Create(/*device=*/0, 4));
//   GENESIS_ASSIGN_OR_RETURN(auto pipeline,
//                            StagingPipeline::Create(std::move(engine), {}));
//   GENESIS_RETURN_IF_ERROR(pipeline->HostToDevice(device_ptr, pageable_ptr, bytes));
//
// Only in a build with CUDA; the header needs no CUDA header.
#ifndef GENESIS_TRANSFER_CUDA_STAGING_ENGINE_H_
#define GENESIS_TRANSFER_CUDA_STAGING_ENGINE_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "genesis/transfer/staging.h"

struct CUstream_st;
struct CUevent_st;

namespace genesis::transfer {

class CudaStagingEngine : public StagingEngine {
 public:
  // An engine for CUDA device `device` with `num_slots` events (slots 0..num_slots-1),
  // and a non-blocking stream of its own. OutOfRange for a device that does not exist;
  // InvalidArgument for num_slots < 1; the CUDA error otherwise.
  static absl::StatusOr<std::unique_ptr<CudaStagingEngine>> Create(int device,
                                                                    int num_slots);
  // Waits for the stream, then destroys the events and the stream.
  ~CudaStagingEngine() override;

  // As StagingEngine promises. Errors name the CUDA call and the device; a slot outside
  // 0..num_slots-1 is InvalidArgument.
  absl::StatusOr<void*> AllocateStaging(size_t bytes) override;
  void FreeStaging(void* p) override;
  absl::Status CopyAsync(void* dst, const void* src, size_t bytes, int slot) override;
  absl::Status Record(int slot) override;
  absl::Status Wait(int slot) override;

  int device() const { return device_; }

 private:
  CudaStagingEngine(int device) : device_(device) {}
  absl::Status CheckSlot(int slot) const;

  int device_;
  CUstream_st* stream_ = nullptr;
  std::vector<CUevent_st*> events_;
  std::vector<bool> recorded_;
};

// The process's staging pipeline for pageable copies to and from CUDA device `device`
// (StagingPipeline's default options over a CudaStagingEngine), created at the first
// call for the device: CopyBytes and the batch copier share it, and its calls take
// turns. The pipelines free their pinned buffers when the process exits (a handler
// that runs before CUDA shuts down; a call after it makes a new pipeline). The first
// call's error is returned by every later one; OutOfRange for a device that does not
// exist.
absl::StatusOr<StagingPipeline*> SharedStagingPipeline(int device);

}  // namespace genesis::transfer

#endif  // GENESIS_TRANSFER_CUDA_STAGING_ENGINE_H_
