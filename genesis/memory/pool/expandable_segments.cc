#include "genesis/memory/pool/expandable_segments.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "genesis/core/absl_compat.h"
#include "genesis/core/status.h"
#include "genesis/memory/allocator_options.h"
#include "genesis/memory/pool/size_classes.h"

namespace genesis::memory::pool_internal {
namespace {

// `bytes` rounded up to a multiple of `chunk` (down where that overflows); 0 if `chunk`
// is 0.
size_t RoundedToChunks(size_t bytes, size_t chunk) {
  if (chunk == 0) return 0;
  size_t rounded = 0;
  return RoundUp(bytes, chunk, &rounded) ? rounded : bytes / chunk * chunk;
}

}  // namespace

ExpandableSegmentSet::ExpandableSegmentSet(const Backend& backend, VirtualMemory& vm,
                                           size_t total_bytes, const PieceCut& cut,
                                           FreeSets& free_sets,
                                           SegmentMap& segments, PoolStats& stats,
                                           size_t allowed_max, size_t min_map)
    : backend_(backend),
      vm_(vm),
      chunk_(vm.granularity()),
      reservation_(ReservationSize(total_bytes, chunk_)),
      cut_(cut),
      free_(free_sets),
      segments_(segments),
      stats_(stats),
      allowed_max_(allowed_max),
      min_map_(RoundedToChunks(min_map, chunk_)) {}

size_t ExpandableSegmentSet::ReservationSize(size_t total_bytes, size_t chunk) {
  if (chunk == 0) return 0;
  constexpr size_t kMaxReservation = size_t{256} << 30;
  const size_t want = total_bytes == 0
                          ? kMaxReservation
                          : std::min(total_bytes + total_bytes / 8, kMaxReservation);
  return RoundedToChunks(want, chunk);
}

absl::StatusOr<Segment*> ExpandableSegmentSet::NewRange(size_t min_bytes, StreamId stream) {
  size_t needed = 0;
  if (!RoundUp(min_bytes, chunk_, &needed)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Allocate: size ", min_bytes, " overflows when rounded up to chunks of ", chunk_,
        " bytes"));
  }
  // A full-size range if the address space has room, else one just large enough.
  size_t bytes = std::max(needed, reservation_);
  absl::StatusOr<void*> base = vm_.Reserve(bytes);
  if (!base.ok() && bytes > needed) {
    bytes = needed;
    base = vm_.Reserve(bytes);
  }
  if (!base.ok()) {
    return Annotate(base.status(), absl::StrCat("reserving ", bytes,
                                                " bytes of address space from ",
                                                ToAbsl(backend_.name())));
  }
  auto* s = new Segment;
  s->ptr = static_cast<char*>(*base);
  s->size = bytes;
  s->stream = stream;
  s->pool = kLarge;
  s->expandable = true;
  Block* u = free_.NewBlock();
  u->ptr = s->ptr;
  u->size = bytes;
  u->stream = stream;
  u->pool = kLarge;
  u->segment = s;
  s->head = u;
  segments_.Add(s);
  stats_.AddSegments(1);
  stats_.Count(kNumSegmentAllocs);
  InsertUnmapped(u);
  return s;
}

void ExpandableSegmentSet::InsertUnmapped(Block* u) {
  u->state.store(State::kUnmapped, std::memory_order_relaxed);
  if (Block* prev = u->prev;
      prev != nullptr && prev->state.load(std::memory_order_relaxed) == State::kUnmapped) {
    unmapped_.erase(prev);
    prev->size += u->size;
    prev->next = u->next;
    if (u->next != nullptr) u->next->prev = prev;
    free_.Recycle(u);
    u = prev;
  }
  if (Block* next = u->next;
      next != nullptr && next->state.load(std::memory_order_relaxed) == State::kUnmapped) {
    unmapped_.erase(next);
    u->size += next->size;
    u->next = next->next;
    if (next->next != nullptr) next->next->prev = u;
    free_.Recycle(next);
  }
  unmapped_.insert(u);
}

absl::StatusOr<Block*> ExpandableSegmentSet::Map(Block* u, char* begin, char* end, Sink* sink) {
  const size_t bytes = static_cast<size_t>(end - begin);
  GENESIS_RETURN_IF_ERROR(vm_.MapPieces(begin, bytes, cut_));
  unmapped_.erase(u);
  Block* mapped = u;
  if (begin > u->ptr) {
    mapped = free_.Split(u, static_cast<size_t>(begin - u->ptr));
    unmapped_.insert(u);
  }
  if (end < mapped->ptr + mapped->size) {
    unmapped_.insert(free_.Split(mapped, bytes));
  }
  stats_.AddGauge(kReservedBytes, kLarge, static_cast<int64_t>(bytes));
  stats_.AddGauge(kCachedBytes, kLarge, static_cast<int64_t>(bytes));
  segments_.RaiseHighWater(stats_.GaugeNow(kReservedBytes, kAllPools));
  stats_.Count(kNumMaps);
  if (sink != nullptr) {
    sink->push_back(
        MakeEvent(AllocatorEventType::kSegmentMap, bytes, 0, begin, mapped->stream));
  }
  return free_.FreeAndMerge(mapped);
}

size_t ExpandableSegmentSet::UnmapInterior(Block* b, size_t bytes, bool at_least,
                                           bool under_pressure, Sink* sink) {
  const auto start = reinterpret_cast<uintptr_t>(b->ptr);
  const uintptr_t end = start + b->size;
  uintptr_t lo = (start + chunk_ - 1) / chunk_ * chunk_;
  uintptr_t hi = end / chunk_ * chunk_;
  if (hi <= lo || bytes == 0) return 0;
  // Memory goes back a whole piece at a time: drop the pieces that stick out of the
  // block (they hold neighbours' bytes too), and of the rest the whole pieces within
  // the last `bytes` (rounded up to chunks). Unmapping less than asked, never more,
  // keeps a loop from unmapping memory that it maps again later in the same step: the
  // high-water mark then rises by less than a piece, once. Room for memory added
  // elsewhere needs all it asks for, so there the piece that holds the boundary goes
  // too.
  if (const auto [first, last] = vm_.PieceAt(lo); first < lo) lo = last;
  if (hi <= lo) return 0;
  if (const auto [first, last] = vm_.PieceAt(hi - 1); last > hi) hi = first;
  if (hi <= lo) return 0;
  if (hi - lo > bytes) {
    const size_t want = (bytes + chunk_ - 1) / chunk_ * chunk_;
    if (want < hi - lo) {
      const auto [first, last] = vm_.PieceAt(hi - want);
      lo = first < hi - want && !at_least ? last : first;
      if (hi <= lo) return 0;
    }
  }
  bytes = hi - lo;
  // On failure the chunks stay mapped, and the pool keeps using them.
  if (!vm_.Unmap(reinterpret_cast<void*>(lo), bytes).ok()) return 0;
  if (under_pressure) {
    if (pressure_unmapped_.size() == kPressureMemory) pressure_unmapped_.pop_front();
    pressure_unmapped_.emplace_back(lo, hi);
  }
  free_.Erase(b);
  Block* middle = b;
  if (lo > start) {
    middle = free_.Split(b, lo - start);
    free_.Insert(b);
  }
  if (hi < end) free_.Insert(free_.Split(middle, bytes));
  stats_.AddGauge(kReservedBytes, kLarge, -static_cast<int64_t>(bytes));
  stats_.AddGauge(kCachedBytes, kLarge, -static_cast<int64_t>(bytes));
  stats_.Count(kNumUnmaps);
  if (sink != nullptr) {
    sink->push_back(MakeEvent(AllocatorEventType::kSegmentUnmap, bytes, 0, middle->ptr,
                              middle->stream));
  }
  InsertUnmapped(middle);
  return bytes;
}

size_t ExpandableSegmentSet::MakeRoom(size_t bytes, Sink* sink) {
  return UnmapIdle(bytes, [] { return false; }, {}, /*at_least=*/true,
                   /*under_pressure=*/true, sink);
}

size_t ExpandableSegmentSet::UnmapIdle(size_t bytes, const std::function<bool()>& done,
                                       std::initializer_list<const Block*> keep,
                                       bool at_least, bool under_pressure, Sink* sink) {
  std::vector<Block*> candidates;
  for (Block* b : free_.blocks(kLarge)) {
    if (b->segment->expandable && b->size >= chunk_ &&
        std::find(keep.begin(), keep.end(), b) == keep.end()) {
      candidates.push_back(b);
    }
  }
  // The largest free blocks first: the fewest calls for the most memory.
  std::sort(candidates.begin(), candidates.end(),
            [](const Block* a, const Block* b) { return a->size > b->size; });
  size_t unmapped = 0;
  for (Block* b : candidates) {
    if (unmapped >= bytes || done()) break;
    unmapped += UnmapInterior(b, bytes - unmapped, at_least, under_pressure, sink);
  }
  return unmapped;
}

absl::StatusOr<Block*> ExpandableSegmentSet::Expand(size_t size, StreamId stream, Sink* sink,
                                                  OomReason* why) {
  auto free_mapped = [](Block* b) {
    return b != nullptr && b->state.load(std::memory_order_relaxed) == State::kFree
               ? b
               : nullptr;
  };
  auto chunks = [this](size_t n) { return (n + chunk_ - 1) / chunk_ * chunk_; };
  // The unmapped range to map: grow the free block before an unmapped block forward,
  // or the one after it backward, whichever maps less; of all candidates, the one
  // that maps least (then the smallest unmapped block, then the lowest address).
  Block* u = nullptr;
  Block* u_prev = nullptr;
  Block* u_next = nullptr;
  char* begin = nullptr;
  char* end = nullptr;
  size_t best = kNoLimit;
  for (auto it = unmapped_.lower_bound(FreeKey{stream, 0, nullptr});
       it != unmapped_.end() && (*it)->stream == stream; ++it) {
    Block* c = *it;
    Block* prev = free_mapped(c->prev);
    Block* next = free_mapped(c->next);
    const size_t p = prev != nullptr ? prev->size : 0;
    const size_t n = next != nullptr ? next->size : 0;
    if (size > p + c->size + n) continue;
    const size_t forward = size > p ? std::min(chunks(size - p), c->size) : 0;
    const size_t backward = size > n ? std::min(chunks(size - n), c->size) : 0;
    const size_t bytes = std::min(forward, backward);
    if (bytes >= best) continue;
    best = bytes;
    u = c;
    u_prev = prev;
    u_next = next;
    begin = forward <= backward ? c->ptr : c->ptr + c->size - backward;
    end = begin + bytes;
  }
  if (u == nullptr) {
    absl::StatusOr<Segment*> s = NewRange(size, stream);
    if (!s.ok()) {
      why->limit_hit = false;
      why->backend_message = std::string(s.status().message());
      return s.status();
    }
    u = (*s)->head;
    begin = u->ptr;
    end = begin + chunks(size);
  }
  // Each piece costs the driver about the same whatever its size, so growth maps at
  // least min_map where the unmapped block has room, in the direction it grows: later
  // requests land in the rest. Not beyond the memory_fraction cap, where it would only
  // push other memory out.
  const auto want = static_cast<size_t>(end - begin);
  const size_t reserved = stats_.GaugeNow(kReservedBytes, kAllPools);
  if (want < min_map_ && want < u->size &&
      (allowed_max_ == kNoLimit ||
       min_map_ <= allowed_max_ - std::min(allowed_max_, reserved))) {
    const size_t ahead = std::min(min_map_, u->size);
    char* const ahead_begin = begin == u->ptr ? begin : end - ahead;
    OomReason ahead_why;
    absl::StatusOr<Block*> b = MapWithinLimits(u, u_prev, u_next, ahead_begin,
                                               ahead_begin + ahead, sink, &ahead_why);
    // Refused by the cap or the backend: what is needed may still fit.
    if (b.ok() || !absl::IsResourceExhausted(b.status())) return b;
  }
  return MapWithinLimits(u, u_prev, u_next, begin, end, sink, why);
}

absl::StatusOr<Block*> ExpandableSegmentSet::MapWithinLimits(Block* u, Block* prev,
                                                             Block* next, char* begin,
                                                             char* end, Sink* sink,
                                                             OomReason* why) {
  const auto bytes = static_cast<int64_t>(end - begin);
  // Below the high-water mark the pool maps new memory; beyond it (or beyond the
  // memory_fraction cap) it first moves idle memory here, so the peak stays put.
  for (auto it = pressure_unmapped_.begin(); it != pressure_unmapped_.end(); ++it) {
    if (it->first < reinterpret_cast<uintptr_t>(end) &&
        reinterpret_cast<uintptr_t>(begin) < it->second) {
      segments_.RaiseHighWater(stats_.GaugeNow(kReservedBytes, kAllPools) + bytes);
      pressure_unmapped_.erase(it);
      break;
    }
  }
  const int64_t reserved = stats_.GaugeNow(kReservedBytes, kAllPools);
  int64_t over = reserved + bytes - segments_.high_water();
  if (allowed_max_ != kNoLimit) {
    over = std::max(over, reserved + bytes - static_cast<int64_t>(allowed_max_));
  }
  if (over > 0) {
    UnmapIdleChunks(static_cast<size_t>(over), [] { return false; }, {u, prev, next},
                    /*under_pressure=*/true, sink);
  }
  if (allowed_max_ != kNoLimit &&
      stats_.GaugeNow(kReservedBytes, kAllPools) + bytes > static_cast<int64_t>(allowed_max_)) {
    why->limit_hit = true;
    return absl::ResourceExhaustedError("memory_fraction limit");
  }
  absl::StatusOr<Block*> b = Map(u, begin, end, sink);
  if (!b.ok()) {
    if (absl::IsResourceExhausted(b.status())) {
      why->limit_hit = false;
      why->backend_message = std::string(b.status().message());
      return b.status();
    }
    return Annotate(b.status(), absl::StrCat("mapping ", bytes, " bytes of ",
                                             ToAbsl(backend_.name())));
  }
  return b;
}

void ExpandableSegmentSet::ReleaseEmptyRanges() {
  for (auto it = segments_.begin(); it != segments_.end();) {
    Segment* s = it->second;
    Block* head = s->head;
    if (!s->expandable || head->next != nullptr ||
        head->state.load(std::memory_order_relaxed) != State::kUnmapped) {
      ++it;
      continue;
    }
    unmapped_.erase(head);
    vm_.Unreserve(s->ptr, s->size);
    free_.Recycle(head);
    stats_.AddSegments(-1);
    stats_.Count(kNumSegmentFrees);
    it = segments_.Erase(it);
    delete s;
  }
}

void ExpandableSegmentSet::Destroy(const Segment* s) {
  // Unmapped blocks are chunk-aligned, so each run of other blocks is too.
  char* run = nullptr;
  for (Block* b = s->head; b != nullptr; b = b->next) {
    const bool mapped = b->state.load(std::memory_order_relaxed) != State::kUnmapped;
    if (mapped && run == nullptr) run = b->ptr;
    if (run != nullptr && (!mapped || b->next == nullptr)) {
      char* run_end = mapped ? b->ptr + b->size : b->ptr;
      (void)vm_.Unmap(run, static_cast<size_t>(run_end - run));
      run = nullptr;
    }
  }
  vm_.Unreserve(s->ptr, s->size);
}

}  // namespace genesis::memory::pool_internal
