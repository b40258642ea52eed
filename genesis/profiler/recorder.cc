#include "genesis/profiler/recorder.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/debugging/stacktrace.h"
#include "absl/strings/str_cat.h"
#include "genesis/memory/observer.h"
#include "genesis/profiler/event_ring.h"
#include "genesis/profiler/tick_clock.h"

namespace genesis::profiler {
namespace {

using memory::AllocatorEvent;
using memory::AllocatorEventType;

constexpr size_t kMaxRingEvents = size_t{1} << 24;
constexpr int kMaxStackDepth = 64;

using memory::FastEventLog;

// Word layout of a RawEvent: the log's record (address, stream, tag, time and kind),
// then, for the recorder's own events (kind FastEventLog::kObserver), the side table's.
enum Word { kAddress, kStream, kTag, kTimeKind, kSize, kDuration, kMeta, kRequested };
constexpr uint64_t kHit = 1, kFast = 2, kSmall = 4;

uint64_t Meta(EventKind kind, uint64_t flags, int source, int aux) {
  return static_cast<uint64_t>(kind) | flags << 8 |
         static_cast<uint64_t>(static_cast<uint16_t>(source)) << 16 |
         static_cast<uint64_t>(static_cast<uint32_t>(aux)) << 32;
}

EventKind KindOf(AllocatorEventType type) {
  switch (type) {
    case AllocatorEventType::kAllocate:
      return EventKind::kAlloc;
    case AllocatorEventType::kFree:
      return EventKind::kFree;
    case AllocatorEventType::kSegmentAlloc:
      return EventKind::kSegmentAlloc;
    case AllocatorEventType::kSegmentFree:
      return EventKind::kSegmentFree;
    case AllocatorEventType::kSegmentMap:
      return EventKind::kSegmentMap;
    case AllocatorEventType::kSegmentUnmap:
      return EventKind::kSegmentUnmap;
    case AllocatorEventType::kOom:
      return EventKind::kOom;
  }
  return EventKind::kAlloc;
}

uint64_t ThisThreadHash() {
  thread_local const uint64_t id = std::hash<std::thread::id>()(std::this_thread::get_id());
  return id;
}

std::atomic<uint64_t> next_core_id{1};

// The ring of the recorder this thread recorded for last, found without a lookup.
struct TlsRing {
  uint64_t core_id = 0;
  EventRing* ring = nullptr;
};
thread_local TlsRing tls_last;

}  // namespace

absl::Status ValidateRecorderOptions(const RecorderOptions& o) {
  if (o.ring_events == 0 || o.ring_events > kMaxRingEvents) {
    return absl::InvalidArgumentError(absl::StrCat(
        "profiler: ring_events must be 1 to ", kMaxRingEvents, " events per thread, not ",
        o.ring_events));
  }
  if (o.stack_depth < 1 || o.stack_depth > kMaxStackDepth) {
    return absl::InvalidArgumentError(absl::StrCat(
        "profiler: stack_depth must be 1 to ", kMaxStackDepth, ", not ", o.stack_depth));
  }
  if (o.fast_path_clock == FastPathClock::kTick &&
      (o.tick_ns < 1000 || o.tick_ns > 1'000'000'000)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "profiler: tick_ns must be 1000 (1 us) to 1e9 (1 s), not ", o.tick_ns));
  }
  if (o.stacks) {
    void* frames[4];
    if (absl::GetStackTrace(frames, 4, 0) <= 0) {
      return absl::FailedPreconditionError(
          "profiler: call stacks were asked for, but this platform's stack unwinder "
          "(absl::GetStackTrace) returns none; record without stacks");
    }
  }
  return absl::OkStatus();
}

class Recorder::Core {
 public:
  explicit Core(const RecorderOptions& options)
      : options_(options), id_(next_core_id.fetch_add(1)), start_ns_(SteadyNowNs()) {
    if (options_.fast_path_clock == FastPathClock::kTick) {
      tick_ = std::make_unique<TickClock>(options_.tick_ns);
    }
  }

  // Where the pool writes this thread's fast-path events for `source`: none with
  // stacks (the pool takes none), so that those events come through OnFastEvent.
  memory::FastEventSink FastSink(int source) {
    if (options_.stacks) return {};
    return {MyRing().log(), static_cast<uint64_t>(static_cast<uint16_t>(source))};
  }

  const RecorderOptions& options() const { return options_; }

  // The calling thread's ring, made on its first event.
  EventRing& MyRing() {
    if (tls_last.core_id == id_) [[likely]] return *tls_last.ring;
    return MyRingSlow();
  }

  [[gnu::always_inline]] void Record(EventKind kind, uint64_t flags, int source, int aux,
                                     int64_t time_ns, const AllocatorEvent* e) {
    RawEvent raw;
    raw.words[kTimeKind] = (static_cast<uint64_t>(time_ns) & FastEventLog::kTimeMask) |
                           uint64_t{FastEventLog::kObserver} << FastEventLog::kKindShift;
    raw.words[kTag] = static_cast<uint64_t>(static_cast<uint16_t>(source))
                      << FastEventLog::kTagShift;
    if (e != nullptr) {
      raw.words[kAddress] = reinterpret_cast<uintptr_t>(e->address);
      raw.words[kSize] = e->size;
      raw.words[kRequested] = e->requested;
      raw.words[kStream] = e->stream;
      raw.words[kDuration] = static_cast<uint64_t>(e->duration_ns);
    }
    raw.words[kMeta] = Meta(kind, flags, source, aux);
    EventRing& ring = MyRing();
    if (options_.stacks) {
      void* frames[kMaxStackDepth];
      // Skips Record and the observer's entry point.
      const int n = absl::GetStackTrace(frames, options_.stack_depth, 2);
      ring.Push(raw, absl::MakeConstSpan(frames, std::max(n, 0)));
    } else {
      ring.Push(raw, {});
    }
  }

  // The fast path's events: no OOM, no pool call, the tick clock's time.
  void OnFastEvent(int source, const AllocatorEvent& e) {
    const uint64_t flags = (e.cache_hit ? kHit : 0) | kFast | (e.small_pool ? kSmall : 0);
    Record(KindOf(e.type), flags, source, -1, FastNow(), &e);
  }

  void OnEvent(int source, memory::CachingAllocator* pool, const AllocatorEvent& e) {
    if (stopped_.load(std::memory_order_relaxed)) return;
    uint64_t flags = (e.cache_hit ? kHit : 0) | (e.from_thread_cache ? kFast : 0) |
                     (e.small_pool ? kSmall : 0);
    int aux = -1;
    if (e.type == AllocatorEventType::kOom) {
      memory::MemoryStats stats = pool->Stats();
      std::lock_guard<std::mutex> lock(mu_);
      aux = static_cast<int>(oom_states_.size());
      oom_states_.push_back(stats);
    }
    const int64_t t = e.timestamp_ns != 0 ? e.timestamp_ns : FastNow();
    Record(KindOf(e.type), flags, source, aux, t, &e);
  }

  int64_t FastNow() const {
    return tick_ != nullptr ? tick_->Now() : SteadyNowNs();
  }

  void Mark(std::string_view name) {
    if (stopped_.load(std::memory_order_relaxed)) return;
    int aux = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto [it, inserted] = marker_ids_.try_emplace(std::string(name), markers_.size());
      if (inserted) markers_.emplace_back(name);
      aux = static_cast<int>(it->second);
    }
    Record(EventKind::kMarker, 0, -1, aux, SteadyNowNs(), nullptr);  // Tag 0xffff.
  }

  struct Source {
    memory::CachingAllocator* pool;
    std::shared_ptr<memory::AllocatorObserver> tap;
    SourceInfo info;
    // The pool's block_rounding and small_size_limit (sizes of fast-path events).
    size_t block_rounding;
    size_t small_size_limit;
  };
  // A thread's ring and the hash of its id.
  struct ThreadRing {
    std::unique_ptr<EventRing> ring;
    uint64_t thread;
  };

  absl::Status Attach(memory::CachingAllocator* pool, std::string device,
                      std::string name, std::shared_ptr<Core> self);
  absl::Status Stop();
  bool stopped() const { return stopped_.load(std::memory_order_relaxed); }
  History Collect() const;

 private:
  EventRing& MyRingSlow() {
    thread_local std::vector<TlsRing> rings;
    for (const TlsRing& r : rings) {
      if (r.core_id == id_) {
        tls_last = r;
        return *r.ring;
      }
    }
    auto ring = std::make_unique<EventRing>(options_.ring_events,
                                            options_.stacks ? options_.stack_depth : 0,
                                            tick_ != nullptr ? tick_->source() : nullptr);
    EventRing* raw = ring.get();
    {
      std::lock_guard<std::mutex> lock(mu_);
      rings_.push_back({std::move(ring), ThisThreadHash()});
    }
    // Entries of recorders that are gone are never matched again (ids are not reused).
    rings.push_back({id_, raw});
    tls_last = rings.back();
    return *raw;
  }

  const RecorderOptions options_;
  const uint64_t id_;
  const int64_t start_ns_;
  std::unique_ptr<TickClock> tick_;
  std::atomic<bool> stopped_{false};
  std::atomic<int64_t> stop_ns_{0};

  mutable std::mutex mu_;
  std::vector<ThreadRing> rings_;
  std::vector<Source> sources_;
  std::vector<std::string> markers_;
  absl::flat_hash_map<std::string, size_t> marker_ids_;
  std::vector<memory::MemoryStats> oom_states_;
};

namespace {

// What a pool calls: forwards its events, tagged with the pool's index, to the core.
class Tap : public memory::AllocatorObserver {
 public:
  Tap(std::shared_ptr<Recorder::Core> core, int source, memory::CachingAllocator* pool)
      : core_(std::move(core)), source_(source), pool_(pool) {}
  void OnEvent(const AllocatorEvent& e) override { core_->OnEvent(source_, pool_, e); }
  void OnFastEvent(const AllocatorEvent& e) override { core_->OnFastEvent(source_, e); }
  memory::FastEventSink FastSinkForThisThread() override { return core_->FastSink(source_); }

 private:
  const std::shared_ptr<Recorder::Core> core_;
  const int source_;
  memory::CachingAllocator* const pool_;
};

}  // namespace

absl::Status Recorder::Core::Attach(memory::CachingAllocator* pool, std::string device,
                                    std::string name, std::shared_ptr<Core> self) {
  if (pool == nullptr) return absl::InvalidArgumentError("profiler: Attach(nullptr)");
  std::shared_ptr<memory::AllocatorObserver> tap;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped()) {
      return absl::FailedPreconditionError("profiler: Attach after the recording stopped");
    }
    for (const Source& s : sources_) {
      if (s.pool == pool) {
        return absl::InvalidArgumentError(absl::StrCat(
            "profiler: the pool of ", device, " (", name, ") is attached already"));
      }
    }
    if (sources_.size() >= 0x7fff) {
      return absl::ResourceExhaustedError("profiler: too many pools attached");
    }
    const memory::MemoryStats stats = pool->Stats();
    Source s{pool, nullptr, {}, pool->options().block_rounding,
             pool->options().small_size_limit};
    s.info.device = std::move(device);
    s.info.name = std::move(name);
    s.info.allocated_at_start = stats.all.allocated_bytes.current;
    s.info.reserved_at_start = stats.all.reserved_bytes.current;
    tap = std::make_shared<Tap>(std::move(self), static_cast<int>(sources_.size()), pool);
    s.tap = tap;
    sources_.push_back(std::move(s));
  }
  pool->AddObserver(std::move(tap));
  return absl::OkStatus();
}

absl::Status Recorder::Core::Stop() {
  std::vector<Source> sources;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped()) return absl::FailedPreconditionError("profiler: stopped twice");
    stopped_.store(true, std::memory_order_relaxed);
    stop_ns_.store(SteadyNowNs(), std::memory_order_relaxed);
    sources = sources_;
  }
  // After RemoveObserver no fast-path event reaches the tap; slow-path events already
  // under way find stopped_ set.
  for (const Source& s : sources) s.pool->RemoveObserver(s.tap.get());
  {
    // The taps hold the core: dropping them here breaks the cycle.
    std::lock_guard<std::mutex> lock(mu_);
    for (Source& s : sources_) s.tap.reset();
  }
  tick_.reset();
  return absl::OkStatus();
}

History Recorder::Core::Collect() const {
  History h;
  h.start_ns = start_ns_;
  std::vector<std::pair<const EventRing*, uint64_t>> rings;
  std::vector<Source> sources;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const ThreadRing& r : rings_) rings.push_back({r.ring.get(), r.thread});
    sources = sources_;
    h.markers = markers_;
    h.oom_states = oom_states_;
  }
  const int64_t stop = stop_ns_.load(std::memory_order_relaxed);
  h.end_ns = stop != 0 ? stop : SteadyNowNs();
  h.time_resolution_ns =
      options_.fast_path_clock == FastPathClock::kTick ? options_.tick_ns : 0;
  for (const Source& s : sources) {
    SourceInfo info = s.info;
    info.segments = s.pool->Snapshot();
    info.stats = s.pool->Stats();
    h.sources.push_back(std::move(info));
  }
  h.num_threads = static_cast<int>(rings.size());
  absl::flat_hash_map<std::vector<uintptr_t>, int> stack_ids;
  for (const auto& [ring, thread] : rings) {
    std::vector<RingEntry> entries;
    h.dropped_events += ring->Read(&entries);
    // A thread's times never go back (the tick clock lags the pool's exact times), so
    // sorting by time keeps each thread's order.
    int64_t last_time = 0;
    for (RingEntry& r : entries) {
      const uint64_t* w = r.event.words;
      Event e;
      const uint64_t kind = w[kTimeKind] >> FastEventLog::kKindShift;
      e.time_ns = last_time =
          std::max(last_time, static_cast<int64_t>(w[kTimeKind] & FastEventLog::kTimeMask));
      e.source = static_cast<int16_t>(static_cast<uint16_t>(w[kTag] >> FastEventLog::kTagShift));
      e.address = w[kAddress];
      e.stream = w[kStream];
      e.thread = thread;
      e.sequence = r.sequence;
      if (kind == FastEventLog::kAllocate || kind == FastEventLog::kFree) {
        // Written by the pool's fast path.
        e.kind = kind == FastEventLog::kAllocate ? EventKind::kAlloc : EventKind::kFree;
        e.requested = w[kTag] & FastEventLog::kRequestedMask;
        const Source* s = e.source >= 0 && static_cast<size_t>(e.source) < sources.size()
                              ? &sources[e.source]
                              : nullptr;
        const uint64_t rounding = s != nullptr ? s->block_rounding : 1;
        e.size = (std::max<uint64_t>(e.requested, 1) + rounding - 1) / rounding * rounding;
        e.cache_hit = e.kind == EventKind::kAlloc;
        e.from_thread_cache = true;
        e.small_pool = s != nullptr && e.size < s->small_size_limit;
        h.events.push_back(e);
        continue;
      }
      const uint64_t meta = w[kMeta];
      e.kind = static_cast<EventKind>(meta & 0xff);
      const uint64_t flags = (meta >> 8) & 0xff;
      e.aux = static_cast<int32_t>(static_cast<uint32_t>(meta >> 32));
      e.size = w[kSize];
      e.requested = w[kRequested];
      e.duration_ns = static_cast<int64_t>(w[kDuration]);
      e.cache_hit = (flags & kHit) != 0;
      e.from_thread_cache = (flags & kFast) != 0;
      e.small_pool = (flags & kSmall) != 0;
      if (!r.stack.empty()) {
        auto [it, inserted] = stack_ids.try_emplace(r.stack, h.stacks.size());
        if (inserted) h.stacks.push_back(std::move(r.stack));
        e.stack = it->second;
      }
      h.events.push_back(e);
    }
  }
  // A thread's events keep their order even where the tick clock gives equal times.
  std::stable_sort(h.events.begin(), h.events.end(), [](const Event& a, const Event& b) {
    return std::tie(a.time_ns, a.thread, a.sequence) < std::tie(b.time_ns, b.thread, b.sequence);
  });
  return h;
}

Recorder::Recorder(std::shared_ptr<Core> core) : core_(std::move(core)) {}

absl::StatusOr<std::unique_ptr<Recorder>> Recorder::Create(const RecorderOptions& options) {
  if (absl::Status s = ValidateRecorderOptions(options); !s.ok()) return s;
  return std::unique_ptr<Recorder>(new Recorder(std::make_shared<Core>(options)));
}

Recorder::~Recorder() {
  if (!core_->stopped()) (void)core_->Stop();
}

absl::Status Recorder::Attach(memory::CachingAllocator* pool, std::string device,
                              std::string pool_name) {
  return core_->Attach(pool, std::move(device), std::move(pool_name), core_);
}

void Recorder::Mark(std::string_view name) { core_->Mark(name); }
absl::Status Recorder::Stop() { return core_->Stop(); }
bool Recorder::stopped() const { return core_->stopped(); }
History Recorder::Collect() const { return core_->Collect(); }
const RecorderOptions& Recorder::options() const { return core_->options(); }

}  // namespace genesis::profiler
