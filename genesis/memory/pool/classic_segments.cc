#include "genesis/memory/pool/classic_segments.h"

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "genesis/core/absl_compat.h"
#include "genesis/core/status.h"
#include "genesis/memory/allocator_options.h"

namespace genesis::memory::pool_internal {

ClassicSegments::ClassicSegments(Backend& backend, FreeSets& free_sets, SegmentMap& segments,
                                 PoolStats& stats, size_t allowed_max)
    : backend_(backend),
      free_(free_sets),
      segments_(segments),
      stats_(stats),
      allowed_max_(allowed_max) {}

absl::StatusOr<Block*> ClassicSegments::NewSegment(size_t segment_size, int pool,
                                                   StreamId stream, Sink* sink,
                                                   OomReason* why) {
  const size_t reserved = static_cast<size_t>(stats_.GaugeNow(kReservedBytes, kAllPools));
  if (allowed_max_ != kNoLimit &&
      (segment_size > allowed_max_ || reserved > allowed_max_ - segment_size)) {
    why->limit_hit = true;
    return absl::ResourceExhaustedError("memory_fraction limit");
  }
  absl::StatusOr<void*> ptr = backend_.AllocateSegment(segment_size);
  if (!ptr.ok()) {
    if (absl::IsResourceExhausted(ptr.status())) {
      why->limit_hit = false;
      why->backend_message = std::string(ptr.status().message());
      return ptr.status();
    }
    return Annotate(ptr.status(), absl::StrCat("allocating a segment of ", segment_size,
                                               " bytes from ", ToAbsl(backend_.name())));
  }
  auto* s = new Segment;
  s->ptr = static_cast<char*>(*ptr);
  s->size = segment_size;
  s->stream = stream;
  s->pool = pool;
  Block* b = free_.NewBlock();
  b->ptr = s->ptr;
  b->size = segment_size;
  b->stream = stream;
  b->pool = pool;
  b->segment = s;
  s->head = b;
  segments_.Add(s);
  stats_.AddGauge(kReservedBytes, pool, static_cast<int64_t>(segment_size));
  stats_.AddGauge(kCachedBytes, pool, static_cast<int64_t>(segment_size));
  stats_.AddSegments(1);
  segments_.RaiseHighWater(stats_.GaugeNow(kReservedBytes, kAllPools));
  stats_.Count(kNumSegmentAllocs);
  ++size_counts_[segment_size];
  free_.Insert(b);
  if (sink != nullptr) {
    sink->push_back(
        MakeEvent(AllocatorEventType::kSegmentAlloc, segment_size, 0, s->ptr, stream));
    sink->back().small_pool = pool == kSmall;
  }
  return b;
}

void ClassicSegments::Release(Segment* s, Sink* sink) {
  Block* b = s->head;
  free_.Erase(b);
  segments_.Remove(s);
  backend_.FreeSegment(s->ptr, s->size);
  stats_.AddGauge(kReservedBytes, s->pool, -static_cast<int64_t>(s->size));
  stats_.AddGauge(kCachedBytes, s->pool, -static_cast<int64_t>(s->size));
  stats_.AddSegments(-1);
  stats_.Count(kNumSegmentFrees);
  if (sink != nullptr) {
    sink->push_back(
        MakeEvent(AllocatorEventType::kSegmentFree, s->size, 0, s->ptr, s->stream));
    sink->back().small_pool = s->pool == kSmall;
  }
  free_.Recycle(b);
  delete s;
}

void ClassicSegments::FreeMemory(const Segment* s) { backend_.FreeSegment(s->ptr, s->size); }

bool ClassicSegments::Recurs(size_t size) const {
  auto it = size_counts_.find(size);
  return it != size_counts_.end() && it->second >= 2;
}

}  // namespace genesis::memory::pool_internal
