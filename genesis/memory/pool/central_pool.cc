#include "genesis/memory/pool/central_pool.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "genesis/core/status.h"
#include "genesis/memory/pool/pointer_errors.h"
#include "genesis/memory/pool/snapshot.h"
#include "genesis/memory/virtual_memory.h"

namespace genesis::memory::pool_internal {
namespace {

size_t AllowedMax(const AllocatorOptions& options, size_t total_bytes) {
  return options.memory_fraction < 1.0
             ? static_cast<size_t>(options.memory_fraction * static_cast<double>(total_bytes))
             : kNoLimit;
}

std::unique_ptr<ExpandableSegmentSet> MakeExpandable(Backend& backend,
                                                   const AllocatorOptions& options,
                                                   size_t total_bytes, FreeSets& free_sets,
                                                   SegmentMap& segments, PoolStats& stats) {
  VirtualMemory* vm = options.expandable_segments == ExpandableSegments::kOff
                          ? nullptr
                          : backend.virtual_memory();
  if (vm == nullptr) return nullptr;
  return std::make_unique<ExpandableSegmentSet>(
      backend, *vm, total_bytes,
      PieceCut{.max_piece = std::max(options.expandable_piece_size, vm->granularity()),
               .min_piece = options.expandable_min_piece,
               .layout = options.expandable_piece_layout},
      free_sets, segments, stats, AllowedMax(options, total_bytes),
      options.expandable_min_map);
}

}  // namespace

CentralPool::CentralPool(Backend& backend, const AllocatorOptions& options,
                         StreamEvents* events, size_t total_bytes, PoolStats& stats)
    : backend_(backend),
      opt_(options),
      stats_(stats),
      total_bytes_(total_bytes),
      allowed_max_(AllowedMax(options, total_bytes)),
      free_(options, stats),
      classic_(backend, free_, segments_, stats, allowed_max_),
      expandable_(MakeExpandable(backend, options, total_bytes, free_, segments_, stats)),
      releaser_(options, total_bytes, free_, classic_, expandable_.get(), stats),
      growth_(opt_, classic_, expandable_.get(), releaser_, segments_, stats),
      pending_(events) {}

CentralPool::~CentralPool() {
  std::lock_guard<std::mutex> lock(mu_);
  pending_.WaitAll();
  for (auto& [addr, s] : segments_) {
    if (s->expandable) {
      expandable_->Destroy(s);
    } else {
      classic_.FreeMemory(s);
    }
    DeleteSegmentRecords(s);
  }
}

absl::Status CentralPool::ProcessEventsLocked(bool wait) {
  return pending_.Process(wait, [this](Block* block) {
    stats_.AddGauge(kActiveBytes, block->pool, -static_cast<int64_t>(block->size));
    free_.FreeAndMerge(block);
  });
}

absl::StatusOr<Block*> CentralPool::AllocateLocked(size_t size, size_t requested,
                                                   size_t segment_size, int pool,
                                                   StreamId stream, bool may_grow,
                                                   Sink* sink, OomReason* why, bool* hit) {
  GENESIS_RETURN_IF_ERROR(ProcessEventsLocked(/*wait=*/false));
  if (Block* b = free_.FindBestFit(pool, stream, size)) {
    free_.Take(b, size, requested);
    *hit = true;
    return b;
  }
  if (!may_grow) return nullptr;
  releaser_.CollectGarbage(segment_size, sink);
  GENESIS_ASSIGN_OR_RETURN(Block * b,
                           growth_.NewSpace(size, segment_size, pool, stream, sink, why));
  free_.Take(b, size, requested);
  *hit = false;
  return b;
}

absl::StatusOr<Block*> CentralPool::AllocateAfterOomLocked(size_t size, size_t requested,
                                                           size_t segment_size, int pool,
                                                           StreamId stream, Sink* sink,
                                                           OomReason* why, bool* hit) {
  // A block that only waits for an event is better than an OOM: wait for it.
  GENESIS_RETURN_IF_ERROR(ProcessEventsLocked(/*wait=*/true));
  if (Block* b = free_.FindBestFit(pool, stream, size)) {
    free_.Take(b, size, requested);
    *hit = true;
    return b;
  }
  releaser_.ReleaseFreeSegments([] { return false; }, sink);
  // The backend is asked again only once that memory is back.
  GENESIS_RETURN_IF_ERROR(releaser_.FinishUnmaps());
  stats_.Count(kNumAllocRetries);
  absl::StatusOr<Block*> b = growth_.NewSpace(size, segment_size, pool, stream, sink, why);
  if (b.ok()) {
    free_.Take(*b, size, requested);
    *hit = false;
    return b;
  }
  if (!absl::IsResourceExhausted(b.status())) return b.status();
  stats_.Count(kNumOoms);
  if (sink != nullptr) {
    sink->push_back(MakeEvent(AllocatorEventType::kOom, size, requested, nullptr, stream));
    sink->back().small_pool = pool == kSmall;
  }
  OomFigures f;
  f.kind = backend_.kind();
  f.device = backend_.device().ToString();
  f.backend_name = std::string(backend_.name());
  f.requested = requested;
  f.size = size;
  f.needed = growth_.BackendRequest(size, segment_size, pool);
  f.allocated = stats_.GaugeNow(kAllocatedBytes, kAllPools);
  f.reserved = stats_.GaugeNow(kReservedBytes, kAllPools);
  f.cached = stats_.GaugeNow(kCachedBytes, kAllPools);
  f.largest_free_block = free_.LargestFreeBlock();
  f.device_memory = backend_.MemoryInfo();
  f.memory_fraction = opt_.memory_fraction;
  f.allowed_max = allowed_max_;
  f.total_bytes = total_bytes_;
  f.max_split_size = opt_.max_split_size;
  return absl::ResourceExhaustedError(OomMessage(f, *why));
}

absl::Status CentralPool::FreeLocked(Block* b, size_t requested) {
  GENESIS_ASSIGN_OR_RETURN(const std::vector<EventId> recorded, pending_.RecordEvents(*b));
  b->recorded_streams.clear();
  const int64_t size = static_cast<int64_t>(b->size);
  stats_.AddGauge(kAllocatedBytes, b->pool, -size);
  stats_.AddGauge(kCachedBytes, b->pool, size);
  stats_.AddGauge(kRequestedBytes, b->pool, -static_cast<int64_t>(requested));
  b->requested.store(0, std::memory_order_relaxed);
  stats_.Count(kNumFrees);
  if (recorded.empty()) {
    stats_.AddGauge(kActiveBytes, b->pool, -size);
    free_.FreeAndMerge(b);
  } else {
    pending_.Add(b, recorded);
  }
  return absl::OkStatus();
}

void CentralPool::EnforceCacheLimitLocked(Sink* sink) { releaser_.EnforceCacheLimit(sink); }

void CentralPool::ReturnCachedBlockLocked(Block* b) {
  // The thread cache counted it as inactive split; the free sets count it again.
  if (IsSplit(b)) stats_.AddGauge(kInactiveSplitBytes, b->pool, -static_cast<int64_t>(b->size));
  free_.FreeAndMerge(b);
}

absl::Status CentralPool::ReleaseCacheLocked(bool wait, Sink* sink) {
  absl::Status status = ProcessEventsLocked(wait);
  releaser_.ReleaseFreeSegments([] { return false; }, sink);
  // Memory given back is with the device when EmptyCache returns.
  status.Update(releaser_.FinishUnmaps());
  return status;
}

absl::Status CentralPool::BadPointerLocked(const void* ptr, const char* what) const {
  return BadPointerError(segments_, ptr, what, backend_.name());
}

std::vector<SegmentSnapshot> CentralPool::SnapshotLocked() const {
  return SnapshotSegments(segments_);
}

}  // namespace genesis::memory::pool_internal
