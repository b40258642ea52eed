// Expandable segments: per stream, a range of virtual memory reserved once (the
// backend's memory and an eighth more; another range if one runs out of room) and
// mapped where blocks need memory, in chunks (VirtualMemory's granularity) grouped into
// pieces of up to expandable_piece_size (mapping_pieces.h) that go back whole. Blocks
// with nothing mapped behind them are kUnmapped, kept in their own set and merged only
// with each other. Growth maps the chunks next to free blocks, at least min_map of them
// so that later requests land in what was mapped ahead; beyond the reserved high-water
// mark (or the memory_fraction cap) it first unmaps idle pieces elsewhere, so memory
// moves to where it is needed instead of being added, and when memory unmapped that
// way is mapped again the mark rises instead. The small pool's new segments take their
// room the same way (MakeRoom). All under the pool lock.
#ifndef GENESIS_MEMORY_POOL_EXPANDABLE_SEGMENTS_H_
#define GENESIS_MEMORY_POOL_EXPANDABLE_SEGMENTS_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <initializer_list>
#include <utility>

#include "absl/status/statusor.h"
#include "genesis/memory/backend.h"
#include "genesis/memory/pool/block.h"
#include "genesis/memory/pool/free_sets.h"
#include "genesis/memory/pool/oom_message.h"
#include "genesis/memory/pool/pool_events.h"
#include "genesis/memory/pool/pool_stats.h"
#include "genesis/memory/pool/segment_map.h"
#include "genesis/memory/stream_events.h"
#include "genesis/memory/virtual_memory.h"

namespace genesis::memory::pool_internal {

class ExpandableSegmentSet {
 public:
  // Everything passed must outlive this. `vm` is the backend's virtual memory;
  // `total_bytes` the backend's memory (0: unknown), which sizes the ranges;
  // `cut` how one map is cut into pieces (piece_layout.h; its max_piece a power of two,
  // at least the granularity); `allowed_max` the memory_fraction cap on reserved
  // memory (kNoLimit if none); `min_map` the least one map adds
  // (AllocatorOptions::expandable_min_map; 0: what the request needs).
  ExpandableSegmentSet(const Backend& backend, VirtualMemory& vm, size_t total_bytes,
                       const PieceCut& cut, FreeSets& free_sets, SegmentMap& segments,
                       PoolStats& stats, size_t allowed_max, size_t min_map = 0);
  ExpandableSegmentSet(const ExpandableSegmentSet&) = delete;
  ExpandableSegmentSet& operator=(const ExpandableSegmentSet&) = delete;

  // Address space per range: `total_bytes` and an eighth more (at most 256 GiB; 256 GiB
  // if unknown), rounded up to `chunk`, so a range rarely runs out before the memory
  // does while many streams' ranges still fit into the address space. 0 if chunk is 0.
  static size_t ReservationSize(size_t total_bytes, size_t chunk);

  // The mapping granularity.
  size_t chunk() const { return chunk_; }

  // A free mapped block of at least `size` for `stream`, in the free sets: of the
  // unmapped blocks of the stream's ranges, the one whose mapping (growing the free
  // block before it forward or the one after it backward) maps least, else a new range.
  // The map covers at least `min_map` where the unmapped block has room (mapping ahead
  // in the direction it grows), unless that would pass the memory_fraction cap or the
  // backend refuses it, when it maps just what is needed. Mapping memory that was
  // unmapped to make room at the high-water mark raises the mark. ResourceExhausted
  // (with `why`) when the memory_fraction cap or the backend refuses.
  absl::StatusOr<Block*> Expand(size_t size, StreamId stream, Sink* sink, OomReason* why);

  // Unmaps free pieces (those wholly inside free blocks) outside `keep`, largest free
  // blocks first, until `bytes` are unmapped, `done()`, or none is left; returns the
  // bytes unmapped. `under_pressure`: to make room at the high-water mark (the ranges
  // are remembered, see Expand).
  size_t UnmapIdleChunks(size_t bytes, const std::function<bool()>& done,
                         std::initializer_list<const Block*> keep, bool under_pressure,
                         Sink* sink) {
    return UnmapIdle(bytes, done, keep, /*at_least=*/false, under_pressure, sink);
  }
  // Makes room for `bytes` that the pool adds elsewhere (a small-pool segment) at the
  // high-water mark: unmaps idle pieces, largest free blocks first, at least `bytes` of
  // them where there are (whole pieces: up to a piece more), as under pressure in
  // Expand. Returns the bytes unmapped.
  size_t MakeRoom(size_t bytes, Sink* sink);
  // Gives back the ranges that have nothing mapped.
  void ReleaseEmptyRanges();
  // Waits until the memory of every unmap is back with the device
  // (VirtualMemory::FinishUnmaps), with the error of one that failed.
  absl::Status FinishUnmaps() { return vm_.FinishUnmaps(); }
  // Unmaps what is mapped in `s` and gives its range back, whatever its blocks
  // (destruction).
  void Destroy(const Segment* s);

 private:
  // Reserves a range of at least `min_bytes` for `stream` (full-size if the address
  // space has room) as one unmapped block.
  absl::StatusOr<Segment*> NewRange(size_t min_bytes, StreamId stream);
  // Maps [begin, end) (chunk-aligned) of the unmapped block `u`; returns the free mapped
  // block that holds it after merging with free neighbours.
  absl::StatusOr<Block*> Map(Block* u, char* begin, char* end, Sink* sink);
  // Expand's last step: makes room at the high-water mark, checks the memory_fraction
  // cap and maps [begin, end) of `u` (whose free neighbours `prev` and `next` are kept).
  absl::StatusOr<Block*> MapWithinLimits(Block* u, Block* prev, Block* next, char* begin,
                                         char* end, Sink* sink, OomReason* why);
  // UnmapIdleChunks, and MakeRoom with `at_least`.
  size_t UnmapIdle(size_t bytes, const std::function<bool()>& done,
                   std::initializer_list<const Block*> keep, bool at_least,
                   bool under_pressure, Sink* sink);
  // Unmaps the whole pieces that lie inside the free block `b` and within its last
  // `bytes` (rounded up to chunks): less than asked, never more, or with `at_least`
  // the pieces that cover them (more than asked by less than a piece). Returns the
  // bytes unmapped (0 if unmapping fails: the pieces stay in use).
  size_t UnmapInterior(Block* b, size_t bytes, bool at_least, bool under_pressure,
                       Sink* sink);
  // Puts the unmapped block `u` (in no set) into the unmapped set, merged with unmapped
  // neighbours.
  void InsertUnmapped(Block* u);

  const Backend& backend_;
  VirtualMemory& vm_;
  const size_t chunk_;
  const size_t reservation_;  // Bytes of address space reserved per range.
  const PieceCut cut_;
  FreeSets& free_;
  SegmentMap& segments_;
  PoolStats& stats_;
  const size_t allowed_max_;
  const size_t min_map_;  // Rounded up to chunks.
  // Unmapped blocks, by stream, size and address.
  BlockSet unmapped_;
  // Ranges unmapped to make room at the high-water mark, most recent last (at most
  // kPressureMemory). Mapping one of them again means the two places take turns: the
  // mark then rises instead, so a loop at its peak stops moving memory back and forth.
  static constexpr size_t kPressureMemory = 64;
  std::deque<std::pair<uintptr_t, uintptr_t>> pressure_unmapped_;
};

}  // namespace genesis::memory::pool_internal

#endif  // GENESIS_MEMORY_POOL_EXPANDABLE_SEGMENTS_H_
