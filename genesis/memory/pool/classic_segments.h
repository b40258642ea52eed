// Classic segments: one allocation from the Backend each (small_segment_size,
// large_segment_size, or a large request's own size), carved into blocks, and given back
// whole once its one block is free. They count toward reserved memory in full.
#ifndef GENESIS_MEMORY_POOL_CLASSIC_SEGMENTS_H_
#define GENESIS_MEMORY_POOL_CLASSIC_SEGMENTS_H_

#include <cstddef>
#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "genesis/memory/backend.h"
#include "genesis/memory/pool/block.h"
#include "genesis/memory/pool/free_sets.h"
#include "genesis/memory/pool/oom_message.h"
#include "genesis/memory/pool/pool_events.h"
#include "genesis/memory/pool/pool_stats.h"
#include "genesis/memory/pool/segment_map.h"
#include "genesis/memory/stream_events.h"

namespace genesis::memory::pool_internal {

class ClassicSegments {
 public:
  // Everything passed must outlive this. `allowed_max`: the memory_fraction cap on
  // reserved memory (kNoLimit if none).
  ClassicSegments(Backend& backend, FreeSets& free_sets, SegmentMap& segments,
                  PoolStats& stats, size_t allowed_max);
  ClassicSegments(const ClassicSegments&) = delete;
  ClassicSegments& operator=(const ClassicSegments&) = delete;

  // Pool lock. Allocates a segment of `segment_size` for `pool` and `stream` from the
  // backend, counts it (reserved and cached bytes, the high-water mark, the sizes seen)
  // and puts its one block into the free sets; returns that block. ResourceExhausted,
  // with `why` saying so, if reserved memory would pass `allowed_max` or the backend is
  // out of memory; the backend's other errors annotated.
  absl::StatusOr<Block*> NewSegment(size_t segment_size, int pool, StreamId stream,
                                    Sink* sink, OomReason* why);
  // Pool lock. Gives the fully free segment `s` back to the backend and forgets it.
  void Release(Segment* s, Sink* sink);
  // Gives the memory of `s` back to the backend, whatever its blocks (destruction).
  void FreeMemory(const Segment* s);

  // Pool lock. True if segments of `size` were allocated more than once (adaptive
  // caching keeps those longer).
  bool Recurs(size_t size) const;

 private:
  Backend& backend_;
  FreeSets& free_;
  SegmentMap& segments_;
  PoolStats& stats_;
  const size_t allowed_max_;
  // How many segments of each size were ever allocated.
  absl::flat_hash_map<size_t, int64_t> size_counts_;
};

}  // namespace genesis::memory::pool_internal

#endif  // GENESIS_MEMORY_POOL_CLASSIC_SEGMENTS_H_
