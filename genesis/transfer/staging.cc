#include "genesis/transfer/staging.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "genesis/core/status.h"

namespace genesis::transfer {
namespace {

constexpr size_t kMaxChunkBytes = size_t{1} << 30;
constexpr int kMaxBuffers = 64;
constexpr int kMaxThreads = 256;
// Pieces larger than this are rounded up to a multiple of it (page-aligned pieces).
constexpr size_t kPieceAlignment = 4096;

// A checksum of `bytes` at `p`, eight bytes at a time; good enough to notice a buffer
// that changed, not meant to resist anyone.
uint64_t Checksum(const void* p, size_t bytes) {
  const auto* b = static_cast<const unsigned char*>(p);
  uint64_t h = 0xcbf29ce484222325ULL ^ bytes;
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t word;
    std::memcpy(&word, b + i, 8);
    h = (h ^ word) * 0x100000001b3ULL;
    h ^= h >> 29;
  }
  for (; i < bytes; ++i) h = (h ^ b[i]) * 0x100000001b3ULL;
  return h;
}

// Whether the `call`th call (from 1) is one of the `times` from the `at`th.
bool FailsAt(int64_t call, int at, int times) {
  return at > 0 && call >= at && call < static_cast<int64_t>(at) + times;
}

absl::Status InjectedFailure(const char* what, int64_t call) {
  return absl::UnavailableError(
      absl::StrCat("injected failure of ", what, " call #", call));
}

}  // namespace

// ---------------------------------------------------------------------------------
// HostStagingEngine

HostStagingEngine::HostStagingEngine(Options options)
    : options_(std::move(options)), thread_([this] { Run(); }) {}

HostStagingEngine::~HostStagingEngine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  queue_cv_.notify_all();
  thread_.join();
  if (options_.on_destroy) options_.on_destroy(stats());
}

HostStagingEngine::Stats HostStagingEngine::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  Stats stats = stats_;
  stats.copies_pending = stats_.copies_queued - stats_.copies_executed;
  stats.live_allocations = static_cast<int64_t>(allocations_.size());
  return stats;
}

uint64_t& HostStagingEngine::RecordedSeq(int slot) {
  if (recorded_seq_.size() <= static_cast<size_t>(slot))
    recorded_seq_.resize(slot + 1, 0);
  return recorded_seq_[slot];
}

absl::StatusOr<void*> HostStagingEngine::AllocateStaging(size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t call = ++stats_.allocate_calls;
  if (FailsAt(call, options_.fail_allocate_at, options_.fail_times))
    return InjectedFailure("AllocateStaging", call);
  const size_t align = options_.alignment;
  if (align < alignof(std::max_align_t) || (align & (align - 1)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("HostStagingEngine: alignment ", align,
                                                   " is not a power of two of at least ",
                                                   alignof(std::max_align_t)));
  }
  if (bytes > SIZE_MAX - align) {
    return absl::ResourceExhaustedError(
        absl::StrCat("HostStagingEngine: cannot allocate ", bytes, " bytes"));
  }
  const size_t rounded = std::max<size_t>(align, (bytes + align - 1) / align * align);
  void* p = std::aligned_alloc(align, rounded);
  if (p == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("HostStagingEngine: out of memory allocating ", bytes, " bytes"));
  }
  allocations_.insert(p);
  stats_.max_allocations =
      std::max(stats_.max_allocations, static_cast<int64_t>(allocations_.size()));
  return p;
}

void HostStagingEngine::FreeStaging(void* p) {
  std::unique_lock<std::mutex> lock(mu_);
  // As cudaFreeHost: nothing queued may still use the memory.
  done_cv_.wait(lock, [&] { return last_executed_seq_ == last_queued_seq_; });
  if (allocations_.erase(p) == 0) {
    ++stats_.bad_frees;
    return;
  }
  std::free(p);
}

absl::Status HostStagingEngine::CopyAsync(void* dst, const void* src, size_t bytes,
                                          int slot) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t call = ++stats_.copy_calls;
    if (FailsAt(call, options_.fail_copy_at, options_.fail_times))
      return InjectedFailure("CopyAsync", call);
    if (slot < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("HostStagingEngine::CopyAsync: negative slot ", slot));
    }
    if (bytes > 0 && (dst == nullptr || src == nullptr)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "HostStagingEngine::CopyAsync: null pointer for a copy of ", bytes, " bytes"));
    }
    if (!sticky_error_.ok()) return sticky_error_;
  }
  // The source is this thread's to read until the copy is queued.
  const uint64_t checksum = options_.verify_sources ? Checksum(src, bytes) : 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(Op{dst, src, bytes, slot, ++last_queued_seq_, checksum});
    ++stats_.copies_queued;
  }
  queue_cv_.notify_one();
  return absl::OkStatus();
}

absl::Status HostStagingEngine::Record(int slot) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t call = ++stats_.record_calls;
  if (FailsAt(call, options_.fail_record_at, options_.fail_times))
    return InjectedFailure("Record", call);
  if (slot < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("HostStagingEngine::Record: negative slot ", slot));
  }
  if (!sticky_error_.ok()) return sticky_error_;
  RecordedSeq(slot) = last_queued_seq_;
  return absl::OkStatus();
}

absl::Status HostStagingEngine::Wait(int slot) {
  std::unique_lock<std::mutex> lock(mu_);
  const int64_t call = ++stats_.wait_calls;
  if (slot < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("HostStagingEngine::Wait: negative slot ", slot));
  }
  const uint64_t target = RecordedSeq(slot);
  done_cv_.wait(lock, [&] { return last_executed_seq_ >= target; });
  if (FailsAt(call, options_.fail_wait_at, options_.fail_times)) {
    return InjectedFailure("Wait", call);
  }
  return sticky_error_;
}

void HostStagingEngine::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    queue_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // Stopping, and everything queued has run.
    const Op op = queue_.front();
    queue_.pop_front();
    const bool skip = !sticky_error_.ok();
    const int64_t run = skip ? 0 : ++copies_run_;
    lock.unlock();

    absl::Status result;
    if (!skip) {
      if (options_.copy_delay.count() > 0) {
        std::this_thread::sleep_for(options_.copy_delay);
      }
      if (options_.before_copy) options_.before_copy(static_cast<int64_t>(op.seq));
      if (FailsAt(run, options_.fail_execution_at, options_.fail_times)) {
        result =
            absl::InternalError(absl::StrCat("injected failure of copy #", run, " (slot ",
                                             op.slot, ", ", op.bytes, " bytes)"));
      } else if (options_.verify_sources && Checksum(op.src, op.bytes) != op.checksum) {
        result = absl::DataLossError(absl::StrCat(
            "HostStagingEngine: the source of copy #", op.seq, " (slot ", op.slot, ", ",
            op.bytes, " bytes) changed while the copy was pending"));
      } else if (op.bytes > 0) {
        std::memcpy(op.dst, op.src, op.bytes);
      }
    }

    lock.lock();
    if (!result.ok()) {
      if (result.code() == absl::StatusCode::kDataLoss) ++stats_.source_mismatches;
      if (sticky_error_.ok()) sticky_error_ = result;
    } else if (!skip) {
      stats_.bytes_copied += static_cast<int64_t>(op.bytes);
    }
    last_executed_seq_ = op.seq;
    ++stats_.copies_executed;
    done_cv_.notify_all();
  }
}

// ---------------------------------------------------------------------------------
// StagingPipeline

// One call's copy. The fields up to `num_chunks` are set before the job is published
// and never change; the rest are guarded by StagingPipeline::mu_.
struct StagingPipeline::Job {
  bool to_device;
  char* host;
  char* device;
  size_t bytes;
  size_t num_chunks;

  // Chunks [0, released) may be handed to the threads, piece by piece, in order.
  size_t released = 0;
  size_t next_chunk = 0;
  size_t next_piece = 0;
  // Per staging buffer: pieces of its current chunk not yet copied.
  std::vector<size_t> remaining = {};
  // Per staging buffer, device to host only: a chunk was queued into it and the
  // threads have not yet finished copying it out.
  std::vector<bool> busy = {};
  int in_flight = 0;  // Pieces being copied right now.
  bool cancelled = false;
};

namespace {

struct PieceLayout {
  size_t piece_bytes;
  size_t count;
};

PieceLayout Pieces(size_t len, size_t min_piece_bytes, int num_threads) {
  const size_t wanted =
      std::clamp<size_t>(len / min_piece_bytes, 1, static_cast<size_t>(num_threads));
  size_t piece = (len + wanted - 1) / wanted;
  if (piece > kPieceAlignment) {
    piece = (piece + kPieceAlignment - 1) / kPieceAlignment * kPieceAlignment;
  }
  return {piece, (len + piece - 1) / piece};
}

}  // namespace

absl::StatusOr<std::unique_ptr<StagingPipeline>> StagingPipeline::Create(
    std::unique_ptr<StagingEngine> engine, Options options) {
  if (engine == nullptr) {
    return absl::InvalidArgumentError("StagingPipeline::Create: the engine is null");
  }
  if (options.chunk_bytes < 1 || options.chunk_bytes > kMaxChunkBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("StagingPipeline: chunk_bytes = ", options.chunk_bytes,
                     " is outside [1, ", kMaxChunkBytes, "]"));
  }
  if (options.num_buffers < 1 || options.num_buffers > kMaxBuffers) {
    return absl::InvalidArgumentError(
        absl::StrCat("StagingPipeline: num_buffers = ", options.num_buffers,
                     " is outside [1, ", kMaxBuffers, "]"));
  }
  if (options.num_threads < 1 || options.num_threads > kMaxThreads) {
    return absl::InvalidArgumentError(
        absl::StrCat("StagingPipeline: num_threads = ", options.num_threads,
                     " is outside [1, ", kMaxThreads, "]"));
  }
  if (options.min_piece_bytes < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "StagingPipeline: min_piece_bytes = ", options.min_piece_bytes, " is below 1"));
  }
  std::vector<void*> staging;
  for (int i = 0; i < options.num_buffers; ++i) {
    absl::StatusOr<void*> p = engine->AllocateStaging(options.chunk_bytes);
    if (!p.ok()) {
      for (void* q : staging) engine->FreeStaging(q);
      return Annotate(
          p.status(),
          absl::StrCat("StagingPipeline: allocating staging buffer ", i, " of ",
                       options.num_buffers, " (", options.chunk_bytes, " bytes)"));
    }
    staging.push_back(*p);
  }
  return std::unique_ptr<StagingPipeline>(
      new StagingPipeline(std::move(engine), options, std::move(staging)));
}

StagingPipeline::StagingPipeline(std::unique_ptr<StagingEngine> engine, Options options,
                                 std::vector<void*> staging)
    : options_(options),
      engine_(std::move(engine)),
      staging_(std::move(staging)),
      slots_(options.num_buffers) {
  workers_.reserve(options_.num_threads);
  for (int i = 0; i < options_.num_threads; ++i) {
    workers_.emplace_back([this] { WorkerLoop(); });
  }
}

StagingPipeline::~StagingPipeline() {
  {
    // Copies a failed call could not confirm: one more try before the buffers go.
    // FreeStaging waits for them in any case.
    std::lock_guard<std::mutex> call(call_mu_);
    for (int slot = 0; slot < options_.num_buffers; ++slot) Settle(slot).IgnoreError();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
  for (void* p : staging_) engine_->FreeStaging(p);
}

absl::Status StagingPipeline::HostToDevice(void* device_dst, const void* host_src,
                                           size_t bytes) {
  if (bytes > 0 && (device_dst == nullptr || host_src == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "StagingPipeline::HostToDevice of ", bytes,
        " bytes: ", device_dst == nullptr ? "the device destination" : "the host source",
        " is null"));
  }
  return Copy(/*to_device=*/true, static_cast<char*>(const_cast<void*>(host_src)),
              static_cast<char*>(device_dst), bytes);
}

absl::Status StagingPipeline::DeviceToHost(void* host_dst, const void* device_src,
                                           size_t bytes) {
  if (bytes > 0 && (host_dst == nullptr || device_src == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "StagingPipeline::DeviceToHost of ", bytes, " bytes: ",
        host_dst == nullptr ? "the host destination" : "the device source", " is null"));
  }
  return Copy(/*to_device=*/false, static_cast<char*>(host_dst),
              static_cast<char*>(const_cast<void*>(device_src)), bytes);
}

absl::Status StagingPipeline::Settle(int slot) {
  SlotState& state = slots_[slot];
  if (state.queued_unrecorded) {
    GENESIS_RETURN_IF_ERROR(engine_->Record(slot));
    state.queued_unrecorded = false;
    state.recorded_unwaited = true;
  }
  if (state.recorded_unwaited) {
    GENESIS_RETURN_IF_ERROR(engine_->Wait(slot));
    state.recorded_unwaited = false;
  }
  return absl::OkStatus();
}

absl::Status StagingPipeline::Copy(bool to_device, char* host, char* device,
                                   size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  std::lock_guard<std::mutex> call(call_mu_);
  for (int slot = 0; slot < options_.num_buffers; ++slot) {
    if (absl::Status s = Settle(slot); !s.ok()) {
      return Annotate(s, absl::StrCat("StagingPipeline: staging buffer ", slot,
                                      " still has copies from an earlier failed call "
                                      "that the engine has not confirmed"));
    }
  }
  const size_t chunk = options_.chunk_bytes;
  Job job{to_device, host, device, bytes, (bytes + chunk - 1) / chunk};
  job.remaining.assign(options_.num_buffers, 0);
  job.busy.assign(options_.num_buffers, false);
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &job;
  }
  absl::Status status = to_device ? RunHostToDevice(job) : RunDeviceToHost(job);
  if (!status.ok()) {
    CancelAndQuiesce(job);
    // Everything queued on the engine must be finished before the caller gets its
    // buffers back. A slot that cannot be confirmed stays dirty (see Copy's start).
    for (int slot = 0; slot < options_.num_buffers; ++slot) Settle(slot).IgnoreError();
    status = Annotate(status, absl::StrCat("StagingPipeline::",
                                           to_device ? "HostToDevice" : "DeviceToHost",
                                           " of ", bytes, " bytes"));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = nullptr;
  }
  return status;
}

void StagingPipeline::CancelAndQuiesce(Job& job) {
  std::unique_lock<std::mutex> lock(mu_);
  job.cancelled = true;
  done_cv_.wait(lock, [&] { return job.in_flight == 0; });
}

absl::Status StagingPipeline::QueueChunk(Job& job, size_t chunk) {
  const int slot = static_cast<int>(chunk % options_.num_buffers);
  const size_t offset = chunk * options_.chunk_bytes;
  const size_t len = std::min(options_.chunk_bytes, job.bytes - offset);
  char* staging = static_cast<char*>(staging_[slot]);
  absl::Status s = job.to_device
                       ? engine_->CopyAsync(job.device + offset, staging, len, slot)
                       : engine_->CopyAsync(staging, job.device + offset, len, slot);
  if (!s.ok()) {
    return Annotate(
        s, absl::StrCat("queueing chunk ", chunk, " through staging buffer ", slot));
  }
  slots_[slot].queued_unrecorded = true;
  if (s = engine_->Record(slot); !s.ok()) {
    return Annotate(s,
                    absl::StrCat("recording chunk ", chunk, " in staging buffer ", slot));
  }
  slots_[slot].queued_unrecorded = false;
  slots_[slot].recorded_unwaited = true;
  return absl::OkStatus();
}

absl::Status StagingPipeline::RunHostToDevice(Job& job) {
  const size_t n = job.num_chunks;
  const size_t k = static_cast<size_t>(options_.num_buffers);
  size_t submitted = 0;  // Chunks queued on the engine.
  while (submitted < n) {
    // 1. Queue the next chunk as soon as the threads have filled its buffer.
    bool filled;
    {
      std::lock_guard<std::mutex> lock(mu_);
      filled = submitted < job.released && job.remaining[submitted % k] == 0;
    }
    if (filled) {
      GENESIS_RETURN_IF_ERROR(QueueChunk(job, submitted));
      ++submitted;
      continue;
    }
    // 2. Otherwise give the threads another chunk, once the DMA that last used its
    //    buffer (chunk `released - k`, already queued) is confirmed. Only this thread
    //    writes `released`.
    const size_t next = job.released;
    if (next < n && next < submitted + k) {
      const int slot = static_cast<int>(next % k);
      if (absl::Status s = Settle(slot); !s.ok()) {
        return Annotate(s, absl::StrCat("waiting for staging buffer ", slot,
                                        " to be free for chunk ", next));
      }
      HandOut(job, slot, next);
      continue;
    }
    // 3. Otherwise wait for the threads to fill chunk `submitted`.
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] { return job.remaining[submitted % k] == 0; });
  }
  // Every chunk is queued; the copy is done when the engine says so.
  for (int slot = 0; slot < options_.num_buffers; ++slot) {
    if (absl::Status s = Settle(slot); !s.ok()) {
      return Annotate(s, absl::StrCat("waiting for staging buffer ", slot));
    }
  }
  return absl::OkStatus();
}

void StagingPipeline::HandOut(Job& job, int slot, size_t chunk) {
  const size_t len =
      std::min(options_.chunk_bytes, job.bytes - chunk * options_.chunk_bytes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    job.remaining[slot] = Pieces(len, options_.min_piece_bytes, options_.num_threads).count;
    ++job.released;
  }
  work_cv_.notify_all();
}

absl::Status StagingPipeline::RunDeviceToHost(Job& job) {
  const size_t n = job.num_chunks;
  const size_t k = static_cast<size_t>(options_.num_buffers);
  size_t queued = 0;     // Chunks queued on the engine.
  size_t confirmed = 0;  // Chunks whose DMA is confirmed (handed to the threads).
  while (confirmed < n) {
    // 1. Queue the next chunk if its buffer has been copied out.
    if (queued < n) {
      bool free;
      {
        std::lock_guard<std::mutex> lock(mu_);
        free = !job.busy[queued % k];
        if (free) job.busy[queued % k] = true;
      }
      if (free) {
        GENESIS_RETURN_IF_ERROR(QueueChunk(job, queued));
        ++queued;
        continue;
      }
    }
    // 2. Otherwise confirm the oldest queued chunk and hand it to the threads.
    if (confirmed < queued) {
      const int slot = static_cast<int>(confirmed % k);
      if (absl::Status s = Settle(slot); !s.ok()) {
        return Annotate(s, absl::StrCat("waiting for chunk ", confirmed,
                                        " in staging buffer ", slot));
      }
      HandOut(job, slot, confirmed);
      ++confirmed;
      continue;
    }
    // 3. Otherwise every buffer is being copied out: wait for the one chunk `queued`
    //    needs.
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] { return !job.busy[queued % k]; });
  }
  // The copy is done when the threads have copied out the last chunks.
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [&] {
    return std::none_of(job.busy.begin(), job.busy.end(), [](bool b) { return b; });
  });
  return absl::OkStatus();
}

void StagingPipeline::WorkerLoop() {
  const size_t k = static_cast<size_t>(options_.num_buffers);
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [&] {
      return stopping_ ||
             (job_ != nullptr && !job_->cancelled && job_->next_chunk < job_->released);
    });
    if (stopping_) return;
    Job& job = *job_;
    const size_t chunk = job.next_chunk;
    const size_t offset = chunk * options_.chunk_bytes;
    const size_t len = std::min(options_.chunk_bytes, job.bytes - offset);
    const PieceLayout layout =
        Pieces(len, options_.min_piece_bytes, options_.num_threads);
    const size_t begin = job.next_piece * layout.piece_bytes;
    const size_t end = std::min(len, begin + layout.piece_bytes);
    if (++job.next_piece == layout.count) {
      job.next_piece = 0;
      ++job.next_chunk;
    }
    ++job.in_flight;
    lock.unlock();

    // The job outlives this piece: its call waits for in_flight to drop to 0 (or for
    // every chunk to be copied) before it returns.
    char* staging = static_cast<char*>(staging_[chunk % k]) + begin;
    char* host = job.host + offset + begin;
    if (job.to_device) {
      std::memcpy(staging, host, end - begin);
    } else {
      std::memcpy(host, staging, end - begin);
    }

    lock.lock();
    --job.in_flight;
    bool notify = job.cancelled && job.in_flight == 0;
    if (--job.remaining[chunk % k] == 0) {
      job.busy[chunk % k] = false;
      notify = true;
    }
    if (notify) done_cv_.notify_all();
  }
}

}  // namespace genesis::transfer
