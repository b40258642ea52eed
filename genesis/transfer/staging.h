// Copies between pageable host memory and device memory through pinned staging buffers.
//
// cudaMemcpy from pageable memory reaches about 8.9 GB/s host-to-device and 15 GB/s
// device-to-host, against about 55 GB/s from pinned memory. A StagingPipeline gets
// closer to the pinned rate by cutting the copy into chunks and overlapping two kinds
// of work: host threads memcpy between the pageable buffer and K pinned staging buffers
// while the copy engine moves earlier (or later) chunks between staging and the device.
//
//   Host to device:  pageable --(host threads)--> staging[i % K] --(DMA)--> device
//   Device to host:  device --(DMA)--> staging[i % K] --(host threads)--> pageable
//
// A staging buffer is reused only after the engine has confirmed that the DMA which
// used it has finished (host to device), or after the host threads have finished
// reading it (device to host, whose DMA was confirmed before they started).
//
// Everything CUDA-specific sits behind StagingEngine, so the whole pipeline runs and is
// tested on the CPU with HostStagingEngine, an engine over plain host memory whose
// copies run on a background thread (optionally slowed down, checked for buffers
// overwritten while a copy is pending, and failing on request).
//
//   GENESIS_ASSIGN_OR_RETURN(std::unique_ptr<StagingPipeline> pipeline,
//                            StagingPipeline::Create(std::move(engine), {}));
//   GENESIS_RETURN_IF_ERROR(pipeline->HostToDevice(device_dst, host_src, nbytes));
//
// This package knows nothing of storages; the callers decide when host memory is
// pageable and large enough to be worth staging (see batch_plan.h).
#ifndef GENESIS_TRANSFER_STAGING_H_
#define GENESIS_TRANSFER_STAGING_H_

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace genesis::transfer {

// Pageable host memory of at least this many bytes is worth staging: below it a plain
// cudaMemcpy, which stages internally, is as fast. Used by CopyBytes and PlanOptions.
inline constexpr size_t kPageableStagingMinBytes = size_t{1} << 20;

// What the pipeline needs from CUDA. A CUDA implementation would own one stream and an
// event per slot: AllocateStaging/FreeStaging are cudaHostAlloc/cudaFreeHost, CopyAsync
// is cudaMemcpyAsync on the stream, Record is cudaEventRecord(event[slot], stream) and
// Wait is cudaEventSynchronize(event[slot]).
//
// The pipeline calls CopyAsync, Record and Wait from one thread at a time (the thread
// running the copy), and AllocateStaging/FreeStaging only from Create and the
// destructor. Implementations need not be thread-safe beyond that, but the copies they
// run asynchronously must not race with those calls.
class StagingEngine {
 public:
  virtual ~StagingEngine() = default;

  // Returns `bytes` of pinned host memory, usable as a CopyAsync source or destination.
  virtual absl::StatusOr<void*> AllocateStaging(size_t bytes) = 0;

  // Frees memory from AllocateStaging. Copies still queued that use it are finished (or
  // abandoned, after an engine failure) first, as cudaFreeHost does.
  virtual void FreeStaging(void* p) = 0;

  // Queues a copy of `bytes` from `src` to `dst`, one of which is a staging buffer and
  // the other device memory; `slot` (>= 0) names the staging buffer. Returns once the
  // copy is queued: `src` must stay unchanged and `dst` unread until a Wait covering it
  // has returned OK. An error means nothing was queued by this call.
  virtual absl::Status CopyAsync(void* dst, const void* src, size_t bytes, int slot) = 0;

  // Records the completion point of what is queued so far for `slot` (it may cover
  // more: a CUDA event covers everything queued on its stream). An error means the
  // point was not recorded; the slot's earlier point, if any, still stands. Such an
  // error must be either transient (a retry can succeed) or final (the engine runs no
  // further copies, as a CUDA context after a sticky error): the pipeline relies on
  // this to return only when nothing it queued can still run.
  virtual absl::Status Record(int slot) = 0;

  // Blocks until the point last recorded for `slot` has been reached, also when it then
  // returns an error (as cudaEventSynchronize does when it reports an earlier
  // asynchronous error): once Wait returns, no copy up to the point is running or will
  // run. Returns OK if every one of them succeeded. OK at once when nothing was ever
  // recorded for `slot`. After an error the pipeline does not reuse the slot's buffer
  // until a later Wait returns OK.
  virtual absl::Status Wait(int slot) = 0;
};

// A StagingEngine over host memory, for tests: "device" memory is host memory, staging
// buffers are aligned host allocations, and copies run on one background thread in FIFO
// order, each after an optional delay, so that a pipeline that reads or reuses a buffer
// too early gets wrong bytes (and, under ThreadSanitizer, a reported race) instead of
// getting away with it.
//
// With Options::verify_sources (the default) each copy's source is checksummed when it
// is queued and again just before it runs; a mismatch means the source (for
// host-to-device, the staging buffer) was overwritten while the copy was pending. The
// copy then fails with DataLoss, which Wait reports, and the mismatch is counted.
//
// Failure injection: fail_*_at = N makes the Nth call (counting from 1 over the
// engine's life) of that function, and the fail_times - 1 calls after it, fail with
// Unavailable ("injected failure of CopyAsync call #N"), like a bad argument: later
// calls work again. A failing AllocateStaging, CopyAsync or Record does nothing; a
// failing Wait first waits, as the StagingEngine contract requires. (fail_record_at
// with fail_times > 1 can break that contract: a copy whose Record keeps failing still
// runs. The pipeline's tests do not do that.)
// fail_execution_at = N makes the Nth copy to run fail with Internal instead of
// copying. Failures of a running copy (this one and a source mismatch) are sticky,
// like a CUDA error that kills the context: every later copy is skipped, and every
// later CopyAsync and Record, and every Wait that returns after it, returns it.
//
// Thread-safe.
class HostStagingEngine : public StagingEngine {
 public:
  // Counters, a consistent snapshot taken under the engine's lock.
  struct Stats {
    int64_t copies_queued = 0;
    int64_t copies_executed = 0;  // Run or skipped after a sticky failure.
    int64_t copies_pending = 0;   // Queued and not yet run.
    int64_t bytes_copied = 0;
    int64_t source_mismatches = 0;  // Sources changed while their copy was pending.
    int64_t live_allocations = 0;
    int64_t max_allocations = 0;
    int64_t bad_frees = 0;  // FreeStaging of a pointer that is not a live allocation.
    int64_t allocate_calls = 0;
    int64_t copy_calls = 0;
    int64_t record_calls = 0;
    int64_t wait_calls = 0;
  };

  struct Options {
    // Each copy sleeps this long before it runs.
    std::chrono::microseconds copy_delay{0};
    // Checksum each copy's source when queued and when run (see the class comment).
    bool verify_sources = true;
    // Staging allocations are aligned to this (a power of two, at least
    // alignof(std::max_align_t)).
    size_t alignment = 4096;
    // 0: never fail. N > 0: the Nth call fails (see the class comment).
    int fail_allocate_at = 0;
    int fail_copy_at = 0;
    int fail_record_at = 0;
    int fail_wait_at = 0;
    int fail_execution_at = 0;
    // Each fail_*_at above fails this many consecutive calls (or copies), from the Nth.
    int fail_times = 1;
    // If set, called on the engine's thread just before each copy runs (after its
    // delay, before its checks), with the copy's sequence number (1, 2, ...): tests use
    // it to hold a copy back deterministically.
    std::function<void(int64_t)> before_copy = nullptr;
    // If set, called by the destructor with the final counters (after the queue has
    // drained), so that tests can check an engine owned by someone else.
    std::function<void(const Stats&)> on_destroy = nullptr;
  };

  HostStagingEngine() : HostStagingEngine(Options()) {}
  explicit HostStagingEngine(Options options);
  // Finishes (or, after a sticky failure, skips) the queued copies, then stops the
  // background thread. Allocations still live are deliberately not freed, so that a
  // leak checker reports whoever forgot to call FreeStaging.
  ~HostStagingEngine() override;

  HostStagingEngine(const HostStagingEngine&) = delete;
  HostStagingEngine& operator=(const HostStagingEngine&) = delete;

  absl::StatusOr<void*> AllocateStaging(size_t bytes) override;
  void FreeStaging(void* p) override;
  // InvalidArgument for a negative slot, or a null pointer with bytes > 0.
  absl::Status CopyAsync(void* dst, const void* src, size_t bytes, int slot) override;
  absl::Status Record(int slot) override;
  absl::Status Wait(int slot) override;

  Stats stats() const;

 private:
  struct Op {
    void* dst;
    const void* src;
    size_t bytes;
    int slot;
    uint64_t seq;  // 1, 2, ...
    uint64_t checksum;
  };

  void Run();
  uint64_t& RecordedSeq(int slot);  // Under mu_.

  const Options options_;

  mutable std::mutex mu_;
  std::condition_variable queue_cv_;  // Run(): work queued, or stopping.
  std::condition_variable done_cv_;   // Wait(), FreeStaging(): a copy finished.
  std::deque<Op> queue_;
  uint64_t last_queued_seq_ = 0;
  uint64_t last_executed_seq_ = 0;
  std::vector<uint64_t> recorded_seq_;  // Per slot; 0: nothing recorded.
  int64_t copies_run_ = 0;  // Copies started (not skipped), for fail_execution_at.
  absl::Status sticky_error_;
  std::set<void*> allocations_;
  Stats stats_;
  bool stopping_ = false;

  std::thread thread_;  // Last: starts after everything above is initialised.
};

// Copies between pageable host memory and device memory through a StagingEngine's
// pinned buffers (see the file comment). Created with Create; keeps its staging buffers
// and a small pool of host threads for its whole life.
//
// Thread-safe. Concurrent calls are serialised: the copy engine is one resource and a
// call already keeps it busy, so they take turns rather than splitting the staging
// buffers between them.
class StagingPipeline {
 public:
  struct Options {
    // Bytes per chunk and per staging buffer. 1 byte to 1 GiB.
    size_t chunk_bytes = size_t{4} << 20;
    // Staging buffers (K). 1 to 64. With 1 there is no overlap of memcpy and DMA.
    int num_buffers = 4;
    // Host threads doing the memcpy to or from staging. 1 to 256. Eight were fastest on
    // a 16-core H100 machine (benchmarks/transfer: 45-48 GB/s against 29 with four).
    int num_threads = 8;
    // A chunk is shared between threads in pieces of at least this many bytes (so small
    // chunks are not cut into pieces too small to be worth a thread handoff). At least 1.
    size_t min_piece_bytes = size_t{256} << 10;
  };

  // Validates `options` (InvalidArgument naming the bad field and value), allocates
  // num_buffers staging buffers of chunk_bytes from `engine` (freeing any already
  // allocated and returning the engine's error, annotated, if one fails) and starts
  // num_threads threads. `engine` must not be null.
  static absl::StatusOr<std::unique_ptr<StagingPipeline>> Create(
      std::unique_ptr<StagingEngine> engine, Options options);

  // Must not be called while a copy is running. Confirms any copies left unconfirmed by
  // a failed call (best effort), stops the threads and frees the staging buffers.
  ~StagingPipeline();

  StagingPipeline(const StagingPipeline&) = delete;
  StagingPipeline& operator=(const StagingPipeline&) = delete;

  // Copies `bytes` from pageable `host_src` to `device_dst` and returns once every byte
  // has arrived (the engine has confirmed every DMA). bytes == 0 is a no-op.
  //
  // Errors: InvalidArgument for a null pointer with bytes > 0. Otherwise the first
  // error of the engine, annotated: the pipeline then stops handing out work, waits for
  // the host threads and for everything it queued on the engine (Record is retried for
  // a copy whose Record failed), and returns that error. The destination then holds an
  // unspecified mix of old and new bytes, and nothing touches either buffer after the
  // return (given an engine that keeps the StagingEngine contract). A staging buffer
  // whose copies the engine did not confirm as successful is not reused until it does:
  // later calls ask it again first, and fail with its error (annotated) while it
  // cannot.
  absl::Status HostToDevice(void* device_dst, const void* host_src, size_t bytes);

  // Copies `bytes` from `device_src` to pageable `host_dst`; as HostToDevice otherwise.
  absl::Status DeviceToHost(void* host_dst, const void* device_src, size_t bytes);

  const Options& options() const { return options_; }
  // The engine this pipeline owns.
  StagingEngine& engine() const { return *engine_; }

 private:
  struct Job;
  // Where each staging buffer stands with the engine, across calls.
  struct SlotState {
    bool queued_unrecorded = false;  // CopyAsync since the last successful Record.
    bool recorded_unwaited = false;  // Record since the last successful Wait.
  };

  StagingPipeline(std::unique_ptr<StagingEngine> engine, Options options,
                  std::vector<void*> staging);

  absl::Status Copy(bool to_device, char* host, char* device, size_t bytes);
  absl::Status RunHostToDevice(Job& job);
  absl::Status RunDeviceToHost(Job& job);
  // Stops handing out pieces of `job` and waits until no thread is working on one.
  void CancelAndQuiesce(Job& job);
  // Records (if needed) and waits for `slot` until the engine confirms its copies.
  absl::Status Settle(int slot);
  absl::Status QueueChunk(Job& job, size_t chunk);
  // Gives chunk `chunk`, in staging buffer `slot`, to the host threads (its pieces to
  // copy) and wakes them.
  void HandOut(Job& job, int slot, size_t chunk);
  void WorkerLoop();

  const Options options_;
  const std::unique_ptr<StagingEngine> engine_;
  const std::vector<void*> staging_;

  std::mutex call_mu_;            // Held for the whole of a call.
  std::vector<SlotState> slots_;  // Under call_mu_.

  std::mutex mu_;                    // Guards the fields below and *job_.
  std::condition_variable work_cv_;  // Workers: pieces released, or stopping.
  std::condition_variable done_cv_;  // Caller: a chunk's memcpy finished.
  Job* job_ = nullptr;
  bool stopping_ = false;

  std::vector<std::thread> workers_;
};

}  // namespace genesis::transfer

#endif  // GENESIS_TRANSFER_STAGING_H_
