// Events for the pool's observers, gathered while the pool holds its locks (a Sink) and
// dispatched after it releases them.
#ifndef GENESIS_MEMORY_POOL_POOL_EVENTS_H_
#define GENESIS_MEMORY_POOL_POOL_EVENTS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "genesis/memory/observer.h"
#include "genesis/memory/stream_events.h"

namespace genesis::memory::pool_internal {

// Events gathered for observers; a null Sink* means nobody observes the pool.
using Sink = std::vector<AllocatorEvent>;

// A hash of the calling thread's id, as events report it.
uint64_t ThisThreadId();
// The steady clock, in nanoseconds.
int64_t NowNs();

// An event stamped with the calling thread and the time; with `start_ns`, its duration
// runs from then.
AllocatorEvent MakeEvent(AllocatorEventType type, size_t size, size_t requested,
                         const void* address, StreamId stream, bool cache_hit = false,
                         int64_t start_ns = 0);

}  // namespace genesis::memory::pool_internal

#endif  // GENESIS_MEMORY_POOL_POOL_EVENTS_H_
