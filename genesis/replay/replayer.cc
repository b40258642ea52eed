#include "genesis/replay/replayer.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "genesis/core/status.h"
#include "genesis/memory/test_backend.h"

namespace genesis::replay {
namespace {

using memory::CachingAllocator;
using memory::MemoryStats;
using memory::StreamId;

absl::string_view ActionName(TraceAction action) {
  std::string_view n = TraceActionName(action);
  return absl::string_view(n.data(), n.size());
}

std::string Hex(uint64_t v) { return absl::StrCat("0x", absl::Hex(v)); }

std::string Where(const ReplayOptions &options, int line) {
  return absl::StrCat(options.name, ":", line);
}

// One pool call, resolved before the timed loop so that the loop does no
// hashing: `slot` indexes the pointer array (one slot per alloc, never reused).
struct Op {
  bool alloc;
  int line;
  uint32_t slot;
  uint64_t size;
  StreamId stream;
  int step;
};

struct Plan {
  std::vector<Op> ops;
  size_t num_slots = 0;
  // Slots allocated and never freed by the trace.
  std::vector<uint32_t> live_at_end;
};

absl::StatusOr<Plan> MakePlan(const std::vector<TraceEvent> &events,
                              const ReplayOptions &options) {
  Plan plan;
  plan.ops.reserve(events.size());
  struct Live {
    uint32_t slot;
    int line;
  };
  absl::flat_hash_map<uint64_t, Live> live;
  for (const TraceEvent &e : events) {
    auto it = live.find(e.address);
    switch (e.action) {
      case TraceAction::kAlloc: {
        if (it != live.end()) {
          return absl::InvalidArgumentError(absl::StrCat(
              Where(options, e.line), ": alloc of ", Hex(e.address),
              ", which is still live (allocated at line ", it->second.line, ")"));
        }
        if (plan.num_slots >= UINT32_MAX) {
          return absl::InvalidArgumentError(absl::StrCat(
              Where(options, e.line), ": too many allocations (2^32) for one replay"));
        }
        const auto slot = static_cast<uint32_t>(plan.num_slots++);
        live.emplace(e.address, Live{slot, e.line});
        plan.ops.push_back(
            Op{true, e.line, slot, e.size, static_cast<StreamId>(e.stream), e.step});
        break;
      }
      case TraceAction::kFreeRequested:
      case TraceAction::kFreeCompleted:
        if (it == live.end()) {
          return absl::InvalidArgumentError(
              absl::StrCat(Where(options, e.line), ": ", ActionName(e.action), " of ",
                           Hex(e.address), ", which is not live"));
        }
        if (e.action == TraceAction::kFreeCompleted) {
          plan.ops.push_back(Op{false, e.line, it->second.slot, 0, 0, e.step});
          live.erase(it);
        }
        break;
    }
  }
  plan.live_at_end.reserve(live.size());
  for (const auto &[address, l] : live) plan.live_at_end.push_back(l.slot);
  std::sort(plan.live_at_end.begin(), plan.live_at_end.end());
  return plan;
}

// Frees the blocks of `slots` (ignoring null pointers); returns the first
// error.
absl::Status FreeSlots(CachingAllocator &pool, const std::vector<void *> &ptrs,
                       const std::vector<uint32_t> &slots) {
  absl::Status first;
  for (uint32_t slot : slots) {
    if (ptrs[slot] == nullptr) continue;
    absl::Status s = pool.Free(ptrs[slot]);
    if (!s.ok() && first.ok()) first = s;
  }
  return first;
}

// The slots live just before ops[end] (those allocated in ops[0, end) and not
// freed).
std::vector<uint32_t> LiveSlotsBefore(const Plan &plan, size_t end) {
  std::vector<char> live(plan.num_slots, 0);
  for (size_t i = 0; i < end; ++i) live[plan.ops[i].slot] = plan.ops[i].alloc ? 1 : 0;
  std::vector<uint32_t> slots;
  for (size_t s = 0; s < live.size(); ++s) {
    if (live[s]) slots.push_back(static_cast<uint32_t>(s));
  }
  return slots;
}

absl::Status Verify(const Plan &plan, const std::vector<void *> &ptrs, size_t alignment,
                    const ReplayOptions &options) {
  OverlapChecker checker;
  for (const Op &op : plan.ops) {
    const auto p = reinterpret_cast<uintptr_t>(ptrs[op.slot]);
    if (!op.alloc) {
      GENESIS_RETURN_IF_ERROR(Annotate(checker.Erase(p), Where(options, op.line)));
      continue;
    }
    if (p == 0) {
      return absl::InternalError(absl::StrCat(Where(options, op.line), ": alloc of ",
                                              op.size, " bytes got no memory"));
    }
    if (p % alignment != 0) {
      return absl::InternalError(absl::StrCat(Where(options, op.line), ": alloc of ",
                                              op.size, " bytes got ", Hex(p),
                                              ", not aligned to ", alignment));
    }
    GENESIS_RETURN_IF_ERROR(
        Annotate(checker.Insert(p, op.size, op.line), Where(options, op.line)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status OverlapChecker::Insert(uintptr_t begin, uint64_t size, int line) {
  const uintptr_t end = begin + std::max<uint64_t>(size, 1);
  if (end < begin) {
    return absl::InternalError(absl::StrCat("block ", Hex(begin), " + ", size,
                                            " wraps around the address space"));
  }
  // The first range starting at or after `begin`, and the one before it.
  auto next = ranges_.lower_bound(begin);
  if (next != ranges_.end() && next->first < end) {
    return absl::InternalError(absl::StrCat("block [", Hex(begin), ", ", Hex(end),
                                            ") overlaps live block [", Hex(next->first),
                                            ", ", Hex(next->second.end),
                                            ") allocated at line ", next->second.line));
  }
  if (next != ranges_.begin()) {
    auto prev = std::prev(next);
    if (prev->second.end > begin) {
      return absl::InternalError(absl::StrCat("block [", Hex(begin), ", ", Hex(end),
                                              ") overlaps live block [", Hex(prev->first),
                                              ", ", Hex(prev->second.end),
                                              ") allocated at line ", prev->second.line));
    }
  }
  ranges_.emplace_hint(next, begin, Range{end, line});
  return absl::OkStatus();
}

absl::Status OverlapChecker::Erase(uintptr_t begin) {
  auto it = ranges_.find(begin);
  if (it == ranges_.end()) {
    return absl::InternalError(
        absl::StrCat("free of ", Hex(begin), ", which is not a live block"));
  }
  ranges_.erase(it);
  return absl::OkStatus();
}

absl::StatusOr<ReplayResult> Replay(const std::vector<TraceEvent> &events,
                                    CachingAllocator &pool,
                                    const ReplayOptions &options) {
  GENESIS_ASSIGN_OR_RETURN(Plan plan, MakePlan(events, options));
  std::vector<void *> ptrs(plan.num_slots, nullptr);

  const MemoryStats before = pool.Stats();
  pool.ResetPeakStats();

  // The timed section: only the pool calls and the pointer array. Where the step
  // changes, the clock stops while the pool's counters are read.
  using Clock = std::chrono::steady_clock;
  const bool by_step = std::any_of(plan.ops.begin(), plan.ops.end(),
                                   [&](const Op &op) { return op.step != plan.ops[0].step; });
  std::vector<StepResult> steps;
  MemoryStats step_before = before;
  size_t step_begin = 0;
  double timed_ns = 0;
  auto end_step = [&](size_t end, Clock::time_point began) {
    const double ns = std::chrono::duration<double, std::nano>(Clock::now() - began).count();
    timed_ns += ns;
    if (!by_step) return;
    const MemoryStats now = pool.Stats();
    StepResult s;
    s.step = plan.ops[step_begin].step;
    s.num_ops = end - step_begin;
    s.segment_allocs = now.num_segment_allocs - step_before.num_segment_allocs;
    s.segment_frees = now.num_segment_frees - step_before.num_segment_frees;
    s.maps = now.num_maps - step_before.num_maps;
    s.unmaps = now.num_unmaps - step_before.num_unmaps;
    s.ns_per_op = s.num_ops == 0 ? 0.0 : ns / static_cast<double>(s.num_ops);
    steps.push_back(s);
    step_before = now;
    step_begin = end;
  };
  absl::Status failure;
  size_t failed_at = plan.ops.size();
  Clock::time_point began = Clock::now();
  for (size_t i = 0; i < plan.ops.size(); ++i) {
    const Op &op = plan.ops[i];
    if (op.step != plan.ops[step_begin].step) {
      end_step(i, began);
      began = Clock::now();
    }
    if (op.alloc) {
      absl::StatusOr<void *> p = pool.Allocate(op.size, op.stream);
      if (!p.ok()) {
        failure =
            Annotate(p.status(), absl::StrCat(Where(options, op.line), ": alloc of ",
                                              op.size, " bytes on stream ", op.stream));
        failed_at = i;
        break;
      }
      ptrs[op.slot] = *p;
    } else {
      absl::Status s = pool.Free(ptrs[op.slot]);
      if (!s.ok()) {
        failure = Annotate(s, absl::StrCat(Where(options, op.line), ": free"));
        failed_at = i;
        break;
      }
    }
  }
  if (!failure.ok()) {
    // Leave the pool as we found it: free what the replay still holds. A block
    // whose Free failed is not retried.
    std::vector<uint32_t> live = LiveSlotsBefore(plan, failed_at);
    if (!plan.ops[failed_at].alloc) {
      live.erase(std::remove(live.begin(), live.end(), plan.ops[failed_at].slot),
                 live.end());
    }
    FreeSlots(pool, ptrs, live).IgnoreError();
    return failure;
  }

  end_step(plan.ops.size(), began);
  const MemoryStats after = pool.Stats();
  ReplayResult r;
  r.steps = std::move(steps);
  r.num_ops = plan.ops.size();
  r.peak_allocated = static_cast<uint64_t>(after.all.allocated_bytes.peak);
  r.peak_reserved = static_cast<uint64_t>(after.all.reserved_bytes.peak);
  r.reserved_over_allocated =
      r.peak_allocated == 0
          ? 0.0
          : static_cast<double>(r.peak_reserved) / static_cast<double>(r.peak_allocated);
  r.segment_allocs = after.num_segment_allocs - before.num_segment_allocs;
  r.segment_frees = after.num_segment_frees - before.num_segment_frees;
  r.maps = after.num_maps - before.num_maps;
  r.unmaps = after.num_unmaps - before.num_unmaps;
  r.backend_calls = r.segment_allocs + r.segment_frees + r.maps + r.unmaps;
  r.ns_per_op = r.num_ops == 0 ? 0.0 : timed_ns / static_cast<double>(r.num_ops);
  r.trace_peak_live = SummarizeTrace(events).peak_live_bytes;
  r.reserved_over_live = r.trace_peak_live == 0 ? 0.0
                                                : static_cast<double>(r.peak_reserved) /
                                                      static_cast<double>(r.trace_peak_live);
  r.live_at_end = static_cast<int64_t>(plan.live_at_end.size());

  // Untimed: free what the trace left live, then check that nothing leaked.
  absl::Status freed = FreeSlots(pool, ptrs, plan.live_at_end);
  if (!freed.ok()) {
    return Annotate(freed, absl::StrCat(options.name, ": freeing the ", r.live_at_end,
                                        " blocks live at the end of the trace"));
  }
  r.final_stats = pool.Stats();
  const int64_t leaked =
      r.final_stats.all.allocated_bytes.current - before.all.allocated_bytes.current;
  if (leaked != 0) {
    return absl::InternalError(absl::StrCat(
        options.name, ": leak: the pool's allocated bytes are ",
        r.final_stats.all.allocated_bytes.current,
        " after the replay freed every block, ", before.all.allocated_bytes.current,
        " before it (", leaked, " bytes leaked)"));
  }

  if (options.verify) {
    const size_t alignment =
        std::min(pool.backend().alignment(), pool.options().block_rounding);
    GENESIS_RETURN_IF_ERROR(Verify(plan, ptrs, alignment, options));
  }
  return r;
}

absl::StatusOr<ReplayResult> ReplayOnHost(const std::vector<TraceEvent> &events,
                                          const memory::AllocatorOptions &pool_options,
                                          const ReplayOptions &options, size_t capacity) {
  GENESIS_ASSIGN_OR_RETURN(
      std::unique_ptr<CachingAllocator> pool,
      CachingAllocator::Create(
          memory::TestBackend::FakeCuda(
              capacity, /*virtual_memory=*/pool_options.expandable_segments !=
                            memory::ExpandableSegments::kOff),
          pool_options));
  return Replay(events, *pool, options);
}

}  // namespace genesis::replay
