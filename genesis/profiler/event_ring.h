// EventRing: the bounded history one thread records, readable from any thread.
//
// The profiler gives every recording thread a ring of its own, so recording an event
// takes no lock, no atomic read-modify-write and no allocation. A ring is a
// memory::FastEventLog of 32-byte records, into which the pool writes its fast-path
// events itself, beside a side table of four more words per record that the
// recorder's own events (slow-path events, markers) fill. When the ring is full the
// oldest events are overwritten; the ring counts them. Readers (reports, on any thread,
// while the writer goes on) copy the records and keep only those the writer cannot
// have overwritten during the copy.
//
//   EventRing ring(/*capacity=*/1 << 16, /*stack_depth=*/0, /*clock=*/nullptr);
//   ring.Push(event, {});                 // On the owning thread only.
//   std::vector<RingEntry> copy; ring.Read(&copy);   // Any thread.
#ifndef GENESIS_PROFILER_EVENT_RING_H_
#define GENESIS_PROFILER_EVENT_RING_H_

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/types/span.h"
#include "genesis/memory/observer.h"

namespace genesis::profiler {

// One recorded event as the ring stores it: words 0-3 the log's record (see
// memory::FastEventLog), words 4-7 the side table's, interpreted by the recorder.
// Records the pool wrote leave words 4-7 as they were.
struct RawEvent {
  uint64_t words[8] = {};
};

// An event read back, with the call stack recorded with it (empty without stacks) and
// its position in the thread's history (0 for the first event the thread recorded).
struct RingEntry {
  RawEvent event;
  uint64_t sequence = 0;
  std::vector<uintptr_t> stack;
};

class EventRing {
 public:
  // `capacity` is rounded up to a power of two; it must be > 0 (the recorder checks
  // its options). `stack_depth` return addresses are kept per event (0: none).
  // `clock`: the time of events the pool writes (memory::FastEventLog).
  EventRing(size_t capacity, int stack_depth, const std::atomic<int64_t>* clock = nullptr);
  EventRing(const EventRing&) = delete;
  EventRing& operator=(const EventRing&) = delete;

  // The log the pool writes the owning thread's fast-path events into.
  memory::FastEventLog* log() { return &log_; }

  // Owning thread only. Records `event` with up to stack_depth() frames of `stack`,
  // overwriting the oldest event when full.
  void Push(const RawEvent& event, absl::Span<void* const> stack) {
    using memory::fast_log_internal::kRecordStore;
    const uint64_t index = log_.Begin();
    memory::FastEventLog::Record& record = log_.record(index);
    const uint64_t slot = index & (log_.capacity() - 1);
    std::atomic<uint64_t>* side = &side_[slot * 4];
    for (int i = 0; i < 4; ++i) side[i].store(event.words[4 + i], kRecordStore);
    if (stack_depth_ > 0) {
      std::atomic<uintptr_t>* frames = &frames_[slot * stack_depth_];
      const size_t n = std::min<size_t>(stack.size(), stack_depth_);
      for (size_t i = 0; i < n; ++i) {
        frames[i].store(reinterpret_cast<uintptr_t>(stack[i]), kRecordStore);
      }
      depths_[slot].store(static_cast<uint32_t>(n), kRecordStore);
    }
    for (int i = 0; i < 4; ++i) record.words[i].store(event.words[i], kRecordStore);
    log_.Publish(index);
  }

  // Any thread. Appends the events the ring holds, oldest first, to `out`, skipping any
  // the writer overwrote while they were copied. Returns how many events this thread
  // recorded so far that are no longer in the ring (dropped as the oldest).
  uint64_t Read(std::vector<RingEntry>* out) const;

  // Events recorded so far (kept or dropped).
  uint64_t recorded() const { return log_.head(); }
  size_t capacity() const { return log_.capacity(); }
  int stack_depth() const { return stack_depth_; }

 private:
  const int stack_depth_;
  memory::FastEventLog log_;
  std::unique_ptr<std::atomic<uint64_t>[]> side_;
  std::unique_ptr<std::atomic<uint32_t>[]> depths_;
  std::unique_ptr<std::atomic<uintptr_t>[]> frames_;
};

}  // namespace genesis::profiler

#endif  // GENESIS_PROFILER_EVENT_RING_H_
