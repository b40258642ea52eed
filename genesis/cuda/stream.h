// Stream: an owning handle to a CUDA stream of one device.
//
// A Stream creates its cudaStream_t on a given device and destroys it (on that device)
// when it goes away, so streams cannot leak or be destroyed twice. It is movable and not
// copyable. Work is queued on it through native() by code that calls CUDA itself.
//
//   GENESIS_ASSIGN_OR_RETURN(Stream stream, Stream::Create(/*device=*/0));
//   launch_something(stream.native());
//   GENESIS_RETURN_IF_ERROR(stream.Synchronize());
//
// The header needs no CUDA header: native() is a CUstream_st*, the type cudaStream_t
// names. In the CPU-only build Create always fails with FailedPrecondition.

#ifndef GENESIS_CUDA_STREAM_H_
#define GENESIS_CUDA_STREAM_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// The CUDA headers' own declaration: cudaStream_t is CUstream_st*.
struct CUstream_st;

namespace genesis::cuda {

class Event;

class Stream {
 public:
  // Creates a stream on CUDA device `device`. `non_blocking` streams
  // (cudaStreamNonBlocking) do not synchronize with the legacy default stream.
  // `priority` follows CUDA: lower numbers are higher priority, 0 is the default, and
  // the valid range is the device's (cudaDeviceGetStreamPriorityRange, e.g. [-5, 0]).
  // Errors: OutOfRange if the device does not exist; InvalidArgument for a priority
  // outside the device's range (naming the range); the CUDA error if creation fails;
  // FailedPrecondition in the CPU-only build. The calling thread's current device is
  // unchanged.
  static absl::StatusOr<Stream> Create(int device, bool non_blocking = true,
                                       int priority = 0);

  // The highest priority a stream of CUDA device `device` may have (the lowest number
  // of its range). Errors as for Create.
  static absl::StatusOr<int> HighestPriority(int device);

  // An empty stream (no CUDA stream; valid() is false): a placeholder to assign to.
  Stream() = default;

  // Destroys the CUDA stream, if any, on its device. Work already queued still
  // completes (cudaStreamDestroy does not wait). Never fails: errors are ignored.
  ~Stream();

  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  // Moving leaves `other` empty.
  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;

  // False for a default-constructed or moved-from stream.
  bool valid() const { return stream_ != nullptr; }
  // The cudaStream_t; nullptr when empty (beware: nullptr also means the legacy default
  // stream to CUDA). Stays owned by this object.
  CUstream_st* native() const { return stream_; }
  // The CUDA ordinal of the stream's device; -1 when empty.
  int device() const { return device_; }
  // The priority and the non-blocking flag the stream was created with.
  int priority() const { return priority_; }
  bool non_blocking() const { return non_blocking_; }

  // Blocks until all work queued on the stream so far has completed. Returns the first
  // error of that work, if any (a status naming the device). FailedPrecondition when
  // empty.
  absl::Status Synchronize() const;

  // True if all work queued so far has completed, false if some is still pending; never
  // blocks. An error of the queued work as a status. FailedPrecondition when empty.
  absl::StatusOr<bool> Query() const;

  // Makes all work queued on this stream from now on wait until `event` has completed
  // (cudaStreamWaitEvent); the host does not block. `event` may belong to another
  // device. FailedPrecondition if either is empty.
  absl::Status Wait(const Event& event) const;

 private:
  Stream(CUstream_st* stream, int device, int priority, bool non_blocking)
      : stream_(stream),
        device_(device),
        priority_(priority),
        non_blocking_(non_blocking) {}
  // Destroys the CUDA stream, if any, and leaves this object empty.
  void Reset() noexcept;

  CUstream_st* stream_ = nullptr;
  int device_ = -1;
  int priority_ = 0;
  bool non_blocking_ = true;
};

// Stream::Wait for a stream this code does not own (a storage's stream; nullptr is the
// legacy default stream of `event`'s device, whichever device is current): work queued
// on `stream` from now on waits for `event`.
// FailedPrecondition if `event` is empty or in the CPU-only build.
absl::Status WaitEvent(CUstream_st* stream, const Event& event);

// Blocks until all work queued on CUDA device `device` (every stream) has completed
// (cudaDeviceSynchronize); returns the first error of that work as a status naming the
// device. OutOfRange if the device does not exist; FailedPrecondition in the CPU-only
// build. The calling thread's current device is unchanged.
absl::Status SynchronizeDevice(int device);

}  // namespace genesis::cuda

#endif  // GENESIS_CUDA_STREAM_H_
