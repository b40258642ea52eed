// CudaStreamEvents: the StreamEvents of a CUDA device pool, built on pooled CUDA events.
//
// A device pool records a marker on a stream when a block used there is freed, and
// reuses the block once the marker has completed (stream_events.h). Each marker is a
// CUDA event created with cudaEventDisableTiming (the cheapest kind); released events go
// back to a free list and are recorded again, so steady-state operation creates no
// events. One object serves one device: streams passed to Record must belong to it.
//
//   GENESIS_ASSIGN_OR_RETURN(std::unique_ptr<CudaStreamEvents> events,
//                            CudaStreamEvents::Create(/*device=*/0));
//   GENESIS_ASSIGN_OR_RETURN(EventId id,
//                            events->Record(reinterpret_cast<StreamId>(cuda_stream)));
//   ...  // Later: events->Query(id), then events->Release(id).
//
// Thread-safe. Only in a build with CUDA (target //genesis/memory:cuda_stream_events);
// the header itself includes no CUDA header.
#ifndef GENESIS_MEMORY_CUDA_STREAM_EVENTS_H_
#define GENESIS_MEMORY_CUDA_STREAM_EVENTS_H_

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "genesis/memory/stream_events.h"

// The CUDA headers' own declaration: cudaEvent_t is CUevent_st*.
struct CUevent_st;

namespace genesis::memory {

class CudaStreamEvents : public StreamEvents {
 public:
  // Events for CUDA device `device`. OutOfRange if it does not exist here (naming it);
  // FailedPrecondition in the CPU-only build. Creates no event yet.
  static absl::StatusOr<std::unique_ptr<CudaStreamEvents>> Create(int device);

  // Destroys every event created, on the device. The pool must have released its ids
  // (or no longer use them); events still pending on a stream are destroyed safely
  // (CUDA frees them once they complete). Never fails.
  ~CudaStreamEvents() override;

  CudaStreamEvents(const CudaStreamEvents&) = delete;
  CudaStreamEvents& operator=(const CudaStreamEvents&) = delete;

  // Records a free event (creating one if none is free) on `stream`, a cudaStream_t of
  // this device cast to StreamId (0: the legacy default stream of this device). The
  // caller's current device is restored afterwards. Errors: the CUDA error of
  // creating or recording (e.g. InvalidArgument for a stream of another device or a
  // destroyed one), after which no id is held.
  absl::StatusOr<EventId> Record(StreamId stream) override;

  // cudaEventQuery: true once all work recorded before the event has finished, false
  // while it is pending (cudaErrorNotReady, which is cleared). InvalidArgument for an
  // id this object did not hand out, FailedPrecondition for one already released; a
  // failure of the recorded work as its CUDA error.
  absl::StatusOr<bool> Query(EventId event) override;

  // cudaEventSynchronize: blocks until the event has completed. Errors as for Query.
  absl::Status Synchronize(EventId event) override;

  // Returns the event to the free list. An id not handed out, or released already, is
  // ignored (and fails a debug assertion).
  void Release(EventId event) override;

  int device() const { return device_; }
  // Events created so far (in use or free); for tests and statistics.
  size_t event_count() const;
  // Events on the free list.
  size_t free_event_count() const;

 private:
  explicit CudaStreamEvents(int device) : device_(device) {}

  // The event of `id` if it is handed out and not released; else the error saying why.
  absl::StatusOr<CUevent_st*> Lookup(EventId id, const char* what) const;

  const int device_;
  mutable std::mutex mutex_;
  // EventId i + 1 names events_[i] (0 is never handed out).
  std::vector<CUevent_st*> events_;
  std::vector<bool> in_use_;
  std::vector<size_t> free_;  // Indices into events_.
};

}  // namespace genesis::memory

#endif  // GENESIS_MEMORY_CUDA_STREAM_EVENTS_H_
