#include "genesis/profiler/event_ring.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace genesis::profiler {
namespace {

RawEvent Numbered(uint64_t n) {
  RawEvent e;
  for (int i = 0; i < 8; ++i) e.words[i] = n * 8 + i;
  return e;
}

TEST(EventRingTest, KeepsEventsInOrder) {
  EventRing ring(8, 0);
  for (uint64_t i = 0; i < 5; ++i) ring.Push(Numbered(i), {});
  std::vector<RingEntry> out;
  EXPECT_EQ(ring.Read(&out), 0u);
  ASSERT_EQ(out.size(), 5u);
  for (uint64_t i = 0; i < 5; ++i) {
    EXPECT_EQ(out[i].sequence, i);
    EXPECT_EQ(out[i].event.words[3], i * 8 + 3);
  }
}

TEST(EventRingTest, FullRingDropsTheOldestAndCountsThem) {
  EventRing ring(6, 0);  // Rounded up to 8.
  EXPECT_EQ(ring.capacity(), 8u);
  for (uint64_t i = 0; i < 20; ++i) ring.Push(Numbered(i), {});
  std::vector<RingEntry> out;
  EXPECT_EQ(ring.Read(&out), 12u);
  ASSERT_EQ(out.size(), 8u);
  EXPECT_EQ(out.front().sequence, 12u);
  EXPECT_EQ(out.back().event.words[0], 19u * 8);
  EXPECT_EQ(ring.recorded(), 20u);
}

TEST(EventRingTest, KeepsStacksUpToItsDepth) {
  EventRing ring(4, 2);
  int a, b, c;
  void* frames[] = {&a, &b, &c};
  ring.Push(Numbered(1), absl::MakeConstSpan(frames, 3));
  ring.Push(Numbered(2), absl::MakeConstSpan(frames, 1));
  std::vector<RingEntry> out;
  ring.Read(&out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].stack, (std::vector<uintptr_t>{reinterpret_cast<uintptr_t>(&a),
                                                  reinterpret_cast<uintptr_t>(&b)}));
  EXPECT_EQ(out[1].stack, (std::vector<uintptr_t>{reinterpret_cast<uintptr_t>(&a)}));
}

// A reader running beside the writer sees only whole events, in order (and tsan sees
// no race).
TEST(EventRingTest, ReadWhileWritingGivesWholeEvents) {
  EventRing ring(64, 1);
  constexpr uint64_t kEvents = 200000;
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (uint64_t i = 0; i < kEvents; ++i) {
      void* frame = reinterpret_cast<void*>(i * 8 + 1);
      ring.Push(Numbered(i), absl::MakeConstSpan(&frame, 1));
    }
    done.store(true);
  });
  int reads = 0;
  while (!done.load() || reads < 3) {
    std::vector<RingEntry> out;
    const uint64_t dropped = ring.Read(&out);
    for (size_t i = 0; i < out.size(); ++i) {
      const uint64_t n = out[i].sequence;
      for (int w = 0; w < 8; ++w) ASSERT_EQ(out[i].event.words[w], n * 8 + w);
      ASSERT_EQ(out[i].stack.size(), 1u);
      ASSERT_EQ(out[i].stack[0], n * 8 + 1);
      if (i > 0) {
        ASSERT_EQ(out[i].sequence, out[i - 1].sequence + 1);
      }
    }
    if (!out.empty()) {
      ASSERT_EQ(out.front().sequence, dropped);
    }
    ++reads;
  }
  writer.join();
}

}  // namespace
}  // namespace genesis::profiler
