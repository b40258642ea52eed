// Every segment of a pool by address (for finding the segment that holds a pointer,
// snapshots and destruction), and the reserved-memory high-water mark that segment
// growth holds the pool to. Guarded by the pool lock; owns no segment.
#ifndef GENESIS_MEMORY_POOL_SEGMENT_MAP_H_
#define GENESIS_MEMORY_POOL_SEGMENT_MAP_H_

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>

#include "genesis/memory/pool/block.h"

namespace genesis::memory::pool_internal {

class SegmentMap {
 public:
  using Map = std::map<uintptr_t, Segment*>;

  // Adds `s`, keyed by its start address.
  void Add(Segment* s) { segments_[reinterpret_cast<uintptr_t>(s->ptr)] = s; }
  // Removes `s` (a segment that was added).
  void Remove(const Segment* s) { segments_.erase(reinterpret_cast<uintptr_t>(s->ptr)); }
  // Removes the segment at `it`; returns the iterator after it.
  Map::iterator Erase(Map::iterator it) { return segments_.erase(it); }

  // The segment whose range holds `p`, or nullptr.
  const Segment* Containing(const void* p) const {
    const auto addr = reinterpret_cast<uintptr_t>(p);
    auto it = segments_.upper_bound(addr);
    if (it == segments_.begin()) return nullptr;
    const Segment* s = std::prev(it)->second;
    return addr < reinterpret_cast<uintptr_t>(s->ptr) + s->size ? s : nullptr;
  }

  // In address order.
  Map::iterator begin() { return segments_.begin(); }
  Map::iterator end() { return segments_.end(); }
  Map::const_iterator begin() const { return segments_.begin(); }
  Map::const_iterator end() const { return segments_.end(); }
  size_t size() const { return segments_.size(); }

  // The most memory the pool ever reserved, as told by RaiseHighWater.
  int64_t high_water() const { return high_water_; }
  // Raises the high-water mark to `reserved` if that is higher.
  void RaiseHighWater(int64_t reserved) { high_water_ = std::max(high_water_, reserved); }

 private:
  Map segments_;
  int64_t high_water_ = 0;
};

}  // namespace genesis::memory::pool_internal

#endif  // GENESIS_MEMORY_POOL_SEGMENT_MAP_H_
