#include "genesis/memory/pool/pool_observers.h"

#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "genesis/memory/observer.h"
#include "genesis/memory/pool/pool_events.h"
#include "genesis/memory/pool/thread_cache.h"
#include "genesis/memory/pool/thread_cache_registry.h"

namespace genesis::memory::pool_internal {
namespace {

class Recorder : public AllocatorObserver {
 public:
  void OnEvent(const AllocatorEvent& e) override { events.push_back(e); }
  void OnFastEvent(const AllocatorEvent& e) override { fast.push_back(e); }
  std::vector<AllocatorEvent> events;
  std::vector<AllocatorEvent> fast;
};

TEST(PoolObserversTest, SlowEventsAreDispatchedAndFastOnesReported) {
  PoolObservers observers(/*small_size_limit=*/1 << 20);
  ThreadCacheRegistry registry;
  auto cache = std::make_shared<ThreadCache>();
  registry.caches.push_back(cache);
  EXPECT_FALSE(observers.observed());
  observers.ReportFast(*cache, AllocatorEventType::kAllocate, 512, 100, nullptr, 0);  // No-op.

  auto recorder = std::make_shared<Recorder>();
  observers.Add(recorder, registry);
  observers.Add(nullptr, registry);
  EXPECT_TRUE(observers.observed());
  observers.Dispatch({MakeEvent(AllocatorEventType::kSegmentAlloc, 2 << 20, 0, nullptr, 0)});
  ASSERT_EQ(recorder->events.size(), 1u);
  EXPECT_EQ(recorder->events[0].type, AllocatorEventType::kSegmentAlloc);
  EXPECT_NE(recorder->events[0].timestamp_ns, 0);

  int x = 0;
  observers.ReportFast(*cache, AllocatorEventType::kFree, 4096, 4000, &x, 7);
  ASSERT_EQ(recorder->fast.size(), 1u);
  const AllocatorEvent& e = recorder->fast[0];
  EXPECT_EQ(e.type, AllocatorEventType::kFree);
  EXPECT_EQ(e.size, 4096u);
  EXPECT_EQ(e.requested, 4000u);
  EXPECT_EQ(e.address, &x);
  EXPECT_EQ(e.stream, 7u);
  EXPECT_TRUE(e.small_pool);
  EXPECT_TRUE(e.from_thread_cache);
  EXPECT_FALSE(e.cache_hit);
  EXPECT_TRUE(cache->sink_asked);

  observers.Remove(recorder.get(), registry);
  EXPECT_FALSE(observers.observed());
  EXPECT_FALSE(cache->sink_asked);  // Asked again from the next list.
  observers.Dispatch({MakeEvent(AllocatorEventType::kFree, 1, 1, nullptr, 0)});
  EXPECT_EQ(recorder->events.size(), 1u);
}

}  // namespace
}  // namespace genesis::memory::pool_internal
