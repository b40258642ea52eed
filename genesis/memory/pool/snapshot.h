// Snapshots of a pool's memory: every segment and its blocks, in address order, with
// each block's state as users see it (a thread-cached block is free, flagged
// in_thread_cache).
#ifndef GENESIS_MEMORY_POOL_SNAPSHOT_H_
#define GENESIS_MEMORY_POOL_SNAPSHOT_H_

#include <vector>

#include "genesis/memory/pool/segment_map.h"
#include "genesis/memory/segment_snapshot.h"

namespace genesis::memory::pool_internal {

// The snapshot of `segments`. The caller holds the pool lock. An expandable segment's
// mapped_bytes are its size less its unmapped blocks; requested bytes are reported for
// allocated blocks only.
std::vector<SegmentSnapshot> SnapshotSegments(const SegmentMap& segments);

}  // namespace genesis::memory::pool_internal

#endif  // GENESIS_MEMORY_POOL_SNAPSHOT_H_
