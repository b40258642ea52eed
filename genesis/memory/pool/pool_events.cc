#include "genesis/memory/pool/pool_events.h"

#include <chrono>
#include <functional>
#include <thread>

namespace genesis::memory::pool_internal {

uint64_t ThisThreadId() {
  thread_local const uint64_t id = std::hash<std::thread::id>()(std::this_thread::get_id());
  return id;
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

AllocatorEvent MakeEvent(AllocatorEventType type, size_t size, size_t requested,
                         const void* address, StreamId stream, bool cache_hit,
                         int64_t start_ns) {
  AllocatorEvent e;
  e.type = type;
  e.size = size;
  e.requested = requested;
  e.address = address;
  e.stream = stream;
  e.cache_hit = cache_hit;
  e.thread_id = ThisThreadId();
  e.timestamp_ns = NowNs();
  if (start_ns != 0) e.duration_ns = e.timestamp_ns - start_ns;
  return e;
}

}  // namespace genesis::memory::pool_internal
