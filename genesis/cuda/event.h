// Event: an owning handle to a CUDA event of one device, for ordering work between
// streams and for timing it on the GPU.
//
// An Event creates its cudaEvent_t on a given device and destroys it (on that device)
// when it goes away; it is movable and not copyable. It is recorded on streams of its
// own device; recording it on another device's stream is refused with InvalidArgument
// (CUDA would fail less clearly). Events are created without timing by default
// (cudaEventDisableTiming, the cheaper kind); ask for timing=true to use ElapsedMs.
//
//   GENESIS_ASSIGN_OR_RETURN(Event start, Event::Create(0, /*timing=*/true));
//   GENESIS_ASSIGN_OR_RETURN(Event end, Event::Create(0, /*timing=*/true));
//   GENESIS_RETURN_IF_ERROR(start.Record(stream));
//   ...  // queue work on `stream`
//   GENESIS_RETURN_IF_ERROR(end.Record(stream));
//   GENESIS_RETURN_IF_ERROR(end.Synchronize());
//   GENESIS_ASSIGN_OR_RETURN(float ms, Event::ElapsedMs(start, end));
//
// The header needs no CUDA header: native() is a CUevent_st*, the type cudaEvent_t
// names. In the CPU-only build Create always fails with FailedPrecondition.

#ifndef GENESIS_CUDA_EVENT_H_
#define GENESIS_CUDA_EVENT_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// The CUDA headers' own declarations: cudaEvent_t is CUevent_st*, cudaStream_t is
// CUstream_st*.
struct CUevent_st;
struct CUstream_st;

namespace genesis::cuda {

class Stream;

class Event {
 public:
  // Creates an event on CUDA device `device`; with `timing` it records timestamps (for
  // ElapsedMs), otherwise it is created with cudaEventDisableTiming. Errors: OutOfRange
  // if the device does not exist; the CUDA error if creation fails; FailedPrecondition in
  // the CPU-only build. The calling thread's current device is unchanged.
  static absl::StatusOr<Event> Create(int device, bool timing = false);

  // An empty event (valid() is false): a placeholder to assign to.
  Event() = default;

  // Destroys the CUDA event, if any, on its device. Never fails: errors are ignored.
  ~Event();

  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  // Moving leaves `other` empty.
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;

  // False for a default-constructed or moved-from event.
  bool valid() const { return event_ != nullptr; }
  // The cudaEvent_t; nullptr when empty. Stays owned by this object.
  CUevent_st* native() const { return event_; }
  // The CUDA ordinal of the event's device; -1 when empty.
  int device() const { return device_; }
  // Whether the event was created with timing (usable with ElapsedMs).
  bool timing() const { return timing_; }
  // Whether Record has succeeded at least once.
  bool recorded() const { return recorded_; }

  // Captures the work queued on `stream` so far (cudaEventRecord); the event completes
  // when that work has. InvalidArgument if `stream` belongs to another device (naming
  // both); FailedPrecondition if either is empty.
  absl::Status Record(const Stream& stream);

  // Like Record(const Stream&), for a raw cudaStream_t of this event's device. nullptr
  // means the legacy default stream of this event's device. InvalidArgument if the
  // stream belongs to another device.
  absl::Status Record(CUstream_st* stream);

  // Blocks until the work captured by the last Record has completed (immediately if
  // never recorded). An error of that work as a status. FailedPrecondition when empty.
  absl::Status Synchronize() const;

  // True if the work captured by the last Record has completed (or if the event was
  // never recorded), false if not yet; never blocks. FailedPrecondition when empty.
  absl::StatusOr<bool> Query() const;

  // Milliseconds between the completion of `start` and of `end` (resolution about
  // 0.5 microseconds). Errors: InvalidArgument if either event was created without
  // timing or they belong to different devices; FailedPrecondition if either is empty
  // or was never recorded; Unavailable (cudaErrorNotReady) if either has not completed
  // yet -- synchronize on `end` first.
  static absl::StatusOr<float> ElapsedMs(const Event& start, const Event& end);

 private:
  Event(CUevent_st* event, int device, bool timing)
      : event_(event), device_(device), timing_(timing) {}
  // Destroys the CUDA event, if any, and leaves this object empty.
  void Reset() noexcept;

  CUevent_st* event_ = nullptr;
  int device_ = -1;
  bool timing_ = false;
  bool recorded_ = false;
};

}  // namespace genesis::cuda

#endif  // GENESIS_CUDA_EVENT_H_
