// EventRing: the bounded history one thread records, readable from any thread.
//
// The profiler gives every recording thread a ring of its own, so recording an event
// takes no lock, no atomic read-modify-write and no allocation: the writer fills a slot
// of eight words (relaxed atomic stores, plain moves on x86) and publishes it by
// advancing its head. When the ring is full the oldest events are overwritten; the
// ring counts them. Readers (reports, on any thread, while the writer goes on) copy the
// slots and keep only those the writer cannot have overwritten during the copy.
//
//   EventRing ring(/*capacity=*/1 << 16, /*stack_depth=*/0);
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

namespace genesis::profiler {
namespace ring_internal {
// ThreadSanitizer does not model fences (gcc refuses them under -fsanitize=thread): there
// the slots are written with release and read with acquire stores instead, the same
// ordering at a higher price.
#if defined(__SANITIZE_THREAD__)
inline constexpr std::memory_order kSlotStore = std::memory_order_release;
inline constexpr std::memory_order kSlotLoad = std::memory_order_acquire;
inline void WriterFence() {}
inline void ReaderFence() {}
#else
inline constexpr std::memory_order kSlotStore = std::memory_order_relaxed;
inline constexpr std::memory_order kSlotLoad = std::memory_order_relaxed;
inline void WriterFence() { std::atomic_thread_fence(std::memory_order_release); }
inline void ReaderFence() { std::atomic_thread_fence(std::memory_order_acquire); }
#endif
}  // namespace ring_internal

// One recorded event as the ring stores it: eight words, interpreted by the recorder.
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
  EventRing(size_t capacity, int stack_depth);
  EventRing(const EventRing&) = delete;
  EventRing& operator=(const EventRing&) = delete;

  // Owning thread only. Records `event` with up to stack_depth() frames of `stack`,
  // overwriting the oldest event when full.
  void Push(const RawEvent& event, absl::Span<void* const> stack) {
    const uint64_t index = head_.load(std::memory_order_relaxed);
    // Says which slot is being overwritten before overwriting it: a reader that saw any
    // store below sees this one too (the fences pair with Read's acquire fence).
    begun_.store(index + 1, std::memory_order_relaxed);
    ring_internal::WriterFence();
    Slot& slot = slots_[index & mask_];
    for (int i = 0; i < 8; ++i) {
      slot.words[i].store(event.words[i], ring_internal::kSlotStore);
    }
    if (stack_depth_ > 0) {
      std::atomic<uintptr_t>* frames = &frames_[(index & mask_) * stack_depth_];
      const size_t n = std::min<size_t>(stack.size(), stack_depth_);
      for (size_t i = 0; i < n; ++i) {
        frames[i].store(reinterpret_cast<uintptr_t>(stack[i]), ring_internal::kSlotStore);
      }
      slot.depth.store(static_cast<uint32_t>(n), ring_internal::kSlotStore);
    }
    head_.store(index + 1, std::memory_order_release);
  }

  // Owning thread only: `time`, or the largest time passed here before if that is later.
  uint64_t Monotonic(uint64_t time) {
    last_time_ = std::max(last_time_, time);
    return last_time_;
  }

  // Any thread. Appends the events the ring holds, oldest first, to `out`, skipping any
  // the writer overwrote while they were copied. Returns how many events this thread
  // recorded so far that are no longer in the ring (dropped as the oldest).
  uint64_t Read(std::vector<RingEntry>* out) const;

  // Events recorded so far (kept or dropped).
  uint64_t recorded() const { return head_.load(std::memory_order_acquire); }
  size_t capacity() const { return mask_ + 1; }
  int stack_depth() const { return stack_depth_; }

 private:
  struct alignas(64) Slot {
    std::atomic<uint64_t> words[8];
    std::atomic<uint32_t> depth{0};
  };

  const size_t mask_;
  const int stack_depth_;
  uint64_t last_time_ = 0;  // The writer's own.
  std::unique_ptr<Slot[]> slots_;
  std::unique_ptr<std::atomic<uintptr_t>[]> frames_;
  alignas(64) std::atomic<uint64_t> head_{0};
  // Index + 1 of the last event whose writing began (head_ + 1 during a Push).
  std::atomic<uint64_t> begun_{0};
};

}  // namespace genesis::profiler

#endif  // GENESIS_PROFILER_EVENT_RING_H_
