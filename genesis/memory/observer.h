// Hooks for watching a CachingAllocator: profilers, memory timelines, leak trackers.
//
// An observer sees every allocation, free, segment change and OOM as it happens, with
// enough context (sizes, address, stream, whether the cache served it, the thread and a
// steady-clock time) to rebuild a memory timeline like PyTorch's memory snapshots. With
// no observer attached the pool pays one relaxed atomic load per call, so production
// code leaves the hooks compiled in. With one attached, the thread-cache fast path stays
// lock-free: its events (cache hits and frees into the thread's cache) go to
// OnFastEvent without a timestamp, so an observer can keep its own cheaper clock, or,
// cheaper still, straight into a FastEventLog the observer hands the pool per thread
// (FastSinkForThisThread): plain stores and one release store, no call.
#ifndef GENESIS_MEMORY_OBSERVER_H_
#define GENESIS_MEMORY_OBSERVER_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "genesis/memory/stream_events.h"

namespace genesis::memory {

enum class AllocatorEventType {
  kAllocate,
  kFree,
  kSegmentAlloc,
  kSegmentFree,
  kOom,
  // Expandable segments: physical memory mapped into (unmapped from) the address range.
  kSegmentMap,
  kSegmentUnmap,
};

// "allocate", "free", "segment_alloc", "segment_free", "oom", "segment_map",
// "segment_unmap".
std::string_view AllocatorEventTypeName(AllocatorEventType type);

struct AllocatorEvent {
  AllocatorEventType type = AllocatorEventType::kAllocate;
  // Block or segment size in bytes (for kOom: the rounded size that could not be had).
  size_t size = 0;
  // Bytes the caller asked for (kAllocate, kFree, kOom); 0 otherwise.
  size_t requested = 0;
  // Block, segment or mapped range start; nullptr for kOom.
  const void* address = nullptr;
  StreamId stream = kNoStream;
  // kAllocate only: served from cached memory (true) or from a new segment (false).
  bool cache_hit = false;
  // Hash of the calling thread's std::thread::id.
  uint64_t thread_id = 0;
  // std::chrono::steady_clock time in nanoseconds, taken when the call's work was done;
  // 0 in events passed to OnFastEvent.
  int64_t timestamp_ns = 0;
  // kAllocate and kFree outside the fast path: nanoseconds the call spent in the pool
  // (0 on the fast path, whose calls take a few nanoseconds).
  int64_t duration_ns = 0;
  // The block belongs to the small pool (requests below small_size_limit).
  bool small_pool = false;
  // Reported from the thread-cache fast path (through OnFastEvent).
  bool from_thread_cache = false;
};

namespace fast_log_internal {
// ThreadSanitizer does not model fences (gcc refuses them under -fsanitize=thread): there
// records are written with release and read with acquire loads instead, the same
// ordering at a higher price.
#if defined(__SANITIZE_THREAD__)
inline constexpr std::memory_order kRecordStore = std::memory_order_release;
inline constexpr std::memory_order kRecordLoad = std::memory_order_acquire;
inline void WriterFence() {}
inline void ReaderFence() {}
#else
inline constexpr std::memory_order kRecordStore = std::memory_order_relaxed;
inline constexpr std::memory_order kRecordLoad = std::memory_order_relaxed;
inline void WriterFence() { std::atomic_thread_fence(std::memory_order_release); }
inline void ReaderFence() { std::atomic_thread_fence(std::memory_order_acquire); }
#endif
}  // namespace fast_log_internal

// FastEventLog: one thread's bounded log of 32-byte records (two to a cache line),
// written by that thread only, readable by any thread while it writes.
//
// The pool writes its fast-path events here (AppendFast) when an observer hands it the
// calling thread's log; the observer may write records of its own kinds into the same
// log (Begin / record / Publish). When full, the oldest records are overwritten. A
// record's words:
//   0: block address;  1: stream;
//   2: bits 0-47 requested bytes, bits 48-63 the sink's tag;
//   3: bits 0-61 steady-clock nanoseconds, bits 62-63 the kind (Kind).
// A fast-path event's block size is its requested bytes (at least 1) rounded up to the
// pool's block_rounding; an allocation was a thread-cache hit, a free went into the
// thread's cache.
//
// Readers: load head() (acquire), copy records below it, then ReaderFence() and load
// begun() (relaxed): records with index >= begun() - capacity() were not overwritten
// during the copy.
class FastEventLog {
 public:
  enum Kind : uint64_t { kAllocate = 0, kFree = 1, kObserver = 2, kObserver2 = 3 };
  static constexpr int kKindShift = 62;
  static constexpr uint64_t kTimeMask = (uint64_t{1} << kKindShift) - 1;
  static constexpr int kTagShift = 48;
  static constexpr uint64_t kRequestedMask = (uint64_t{1} << kTagShift) - 1;

  struct Record {
    std::atomic<uint64_t> words[4];
  };

  // `capacity` is a power of two. `clock`: where fast-path events take their time (a
  // steady-clock value another thread keeps current); nullptr reads the steady clock
  // per event. It must outlive every AppendFast.
  FastEventLog(size_t capacity, const std::atomic<int64_t>* clock);
  FastEventLog(const FastEventLog&) = delete;
  FastEventLog& operator=(const FastEventLog&) = delete;

  // Owning thread only. A fast-path event; `requested` < 2^48, `tag` < 2^16.
  void AppendFast(Kind kind, const void* address, StreamId stream, size_t requested,
                  uint64_t tag) {
    const int64_t now = clock_ != nullptr ? clock_->load(std::memory_order_relaxed)
                                          : SteadyNow();
    const uint64_t index = Begin();
    Record& r = record(index);
    using fast_log_internal::kRecordStore;
    r.words[0].store(reinterpret_cast<uintptr_t>(address), kRecordStore);
    r.words[1].store(stream, kRecordStore);
    r.words[2].store(requested | tag << kTagShift, kRecordStore);
    r.words[3].store((static_cast<uint64_t>(now) & kTimeMask) | uint64_t{kind} << kKindShift,
                     kRecordStore);
    Publish(index);
  }

  // Owning thread only: announces the record at the returned index, to be written with
  // kRecordStore stores into record(index) (and any side tables the observer keeps by
  // index) and then published.
  uint64_t Begin() {
    const uint64_t index = head_.load(std::memory_order_relaxed);
    // Says which record is being overwritten before overwriting it: a reader that saw
    // any store that follows sees this one too (the fences pair with ReaderFence).
    begun_.store(index + 1, std::memory_order_relaxed);
    fast_log_internal::WriterFence();
    return index;
  }
  void Publish(uint64_t index) { head_.store(index + 1, std::memory_order_release); }

  Record& record(uint64_t index) { return records_[index & mask_]; }
  const Record& record(uint64_t index) const { return records_[index & mask_]; }
  // Records written so far (kept or overwritten).
  uint64_t head() const { return head_.load(std::memory_order_acquire); }
  // Index + 1 of the last record whose writing began.
  uint64_t begun() const { return begun_.load(std::memory_order_relaxed); }
  size_t capacity() const { return mask_ + 1; }

  static int64_t SteadyNow() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

 private:
  const uint64_t mask_;
  const std::atomic<int64_t>* const clock_;
  std::unique_ptr<Record[]> records_;
  alignas(64) std::atomic<uint64_t> head_{0};
  std::atomic<uint64_t> begun_{0};
};

// Where the pool writes one thread's fast-path events for an observer: its log and the
// tag stored with each record (which pool, for an observer of several).
struct FastEventSink {
  FastEventLog* log = nullptr;
  uint64_t tag = 0;
};

class AllocatorObserver {
 public:
  virtual ~AllocatorObserver() = default;
  // Called on the thread that made the allocator call, after the allocator released its
  // locks, so an observer may call back into the allocator (e.g. Stats()). Must be
  // thread-safe: several threads may report at once. Events of different threads are not
  // ordered with each other; order by timestamp.
  virtual void OnEvent(const AllocatorEvent& event) = 0;

  // Events of the thread-cache fast path: kAllocate hits served from the calling
  // thread's cache and kFree of blocks going back into it. Called on the calling thread
  // without any pool lock and without taking one, with timestamp_ns == 0. Must not
  // block, and must not call RemoveObserver (which waits for calls in here to finish).
  // The default stamps the event with the steady clock and passes it to OnEvent.
  virtual void OnFastEvent(const AllocatorEvent& event);

  // The calling thread's log for fast-path events instead of OnFastEvent, or a sink with
  // a null log (the default) for OnFastEvent. Asked on the calling thread under the same
  // conditions as OnFastEvent, once per thread while the pool's observers stay the same,
  // and used only while they do, and only while this is the pool's one observer. The
  // log must stay valid until RemoveObserver(this) returns.
  virtual FastEventSink FastSinkForThisThread();
};

}  // namespace genesis::memory

#endif  // GENESIS_MEMORY_OBSERVER_H_
