#include "genesis/profiler/summary.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "genesis/core/byte_size.h"
#include "genesis/profiler/timeline.h"

namespace genesis::profiler {
namespace {

std::string Human(int64_t n) { return FormatByteSize(static_cast<uint64_t>(std::max<int64_t>(n, 0))); }

uint64_t ClassFloor(uint64_t size) {
  uint64_t floor = 512;
  while (floor * 4 <= size && floor < (uint64_t{1} << 60)) floor *= 4;
  return size < 512 ? 0 : floor;
}

}  // namespace

MemorySummary Summarize(const History& history) {
  MemorySummary out;
  out.duration_ns = history.end_ns - history.start_ns;
  out.dropped_events = history.dropped_events;
  out.num_threads = history.num_threads;
  out.time_resolution_ns = history.time_resolution_ns;
  const std::vector<SourceTimeline> timeline = BuildTimeline(history);
  for (size_t s = 0; s < history.sources.size(); ++s) {
    PoolSummary p;
    p.label = SourceLabel(history.sources[s]);
    p.peak_allocated = timeline[s].peak_allocated;
    p.peak_allocated_at_ns = timeline[s].peak_allocated_ns - history.start_ns;
    p.peak_reserved = timeline[s].peak_reserved;
    p.peak_reserved_at_ns = timeline[s].peak_reserved_ns - history.start_ns;
    out.pools.push_back(p);
  }
  std::map<uint64_t, SizeClass> classes;
  for (const Event& e : history.events) {
    if (e.kind == EventKind::kMarker) {
      ++out.markers;
      continue;
    }
    if (e.source < 0 || e.source >= static_cast<int>(out.pools.size())) continue;
    PoolSummary& p = out.pools[e.source];
    switch (e.kind) {
      case EventKind::kAlloc: {
        ++p.allocs;
        p.cache_hits += e.cache_hit;
        p.thread_cache_hits += e.from_thread_cache;
        p.time_in_pool_ns += e.duration_ns;
        SizeClass& c = classes[ClassFloor(e.size)];
        ++c.allocs;
        c.bytes += e.size;
        c.cache_hits += e.cache_hit;
        break;
      }
      case EventKind::kFree:
        ++p.frees;
        p.time_in_pool_ns += e.duration_ns;
        break;
      case EventKind::kSegmentAlloc:
        ++p.segment_allocs;
        break;
      case EventKind::kSegmentFree:
        ++p.segment_frees;
        break;
      case EventKind::kSegmentMap:
        ++p.maps;
        break;
      case EventKind::kSegmentUnmap:
        ++p.unmaps;
        break;
      case EventKind::kOom:
        ++p.ooms;
        break;
      case EventKind::kMarker:
        break;
    }
  }
  for (PoolSummary& p : out.pools) {
    p.hit_rate = p.allocs > 0 ? static_cast<double>(p.cache_hits) / p.allocs : 0.0;
  }
  for (auto& [floor, c] : classes) {
    c.min_bytes = floor;
    c.max_bytes = floor == 0 ? 512 : floor * 4;
    out.size_classes.push_back(c);
  }
  return out;
}

std::string MemorySummary::ToText() const {
  std::string s = absl::StrFormat(
      "Memory profile: %.3f ms, %d thread(s), %d marker(s), %d event(s) dropped%s\n",
      duration_ns / 1e6, num_threads, markers, dropped_events,
      dropped_events > 0 ? " (oldest first: enlarge ring_events to keep them)" : "");
  absl::StrAppend(&s, absl::StrFormat("%-18s %12s %10s %12s %10s %8s %8s %7s %6s %6s %5s %12s\n",
                                      "pool", "peak alloc", "at ms", "peak reserv",
                                      "at ms", "allocs", "frees", "hit %", "segs", "maps",
                                      "ooms", "pool time"));
  for (const PoolSummary& p : pools) {
    absl::StrAppend(
        &s, absl::StrFormat("%-18s %12s %10.3f %12s %10.3f %8d %8d %7.1f %6d %6d %5d %9.3f ms\n",
                            p.label, Human(p.peak_allocated), p.peak_allocated_at_ns / 1e6,
                            Human(p.peak_reserved), p.peak_reserved_at_ns / 1e6, p.allocs,
                            p.frees, 100.0 * p.hit_rate, p.segment_allocs, p.maps, p.ooms,
                            p.time_in_pool_ns / 1e6));
  }
  if (!size_classes.empty()) {
    absl::StrAppend(&s, absl::StrFormat("%-24s %10s %12s %7s\n", "size class", "allocs",
                                        "bytes", "hit %"));
    for (const SizeClass& c : size_classes) {
      absl::StrAppend(&s, absl::StrFormat(
                              "%-24s %10d %12s %7.1f\n",
                              absl::StrCat("[", Human(c.min_bytes), ", ", Human(c.max_bytes), ")"),
                              c.allocs, Human(c.bytes),
                              c.allocs > 0 ? 100.0 * c.cache_hits / c.allocs : 0.0));
    }
  }
  return s;
}

nlohmann::json MemorySummary::ToJson() const {
  nlohmann::json j;
  j["duration_ns"] = duration_ns;
  j["dropped_events"] = dropped_events;
  j["num_threads"] = num_threads;
  j["markers"] = markers;
  j["time_resolution_ns"] = time_resolution_ns;
  j["pools"] = nlohmann::json::array();
  for (const PoolSummary& p : pools) {
    j["pools"].push_back({{"pool", p.label},
                          {"peak_allocated", p.peak_allocated},
                          {"peak_allocated_at_ns", p.peak_allocated_at_ns},
                          {"peak_reserved", p.peak_reserved},
                          {"peak_reserved_at_ns", p.peak_reserved_at_ns},
                          {"allocs", p.allocs},
                          {"frees", p.frees},
                          {"cache_hits", p.cache_hits},
                          {"thread_cache_hits", p.thread_cache_hits},
                          {"hit_rate", p.hit_rate},
                          {"segment_allocs", p.segment_allocs},
                          {"segment_frees", p.segment_frees},
                          {"maps", p.maps},
                          {"unmaps", p.unmaps},
                          {"ooms", p.ooms},
                          {"time_in_pool_ns", p.time_in_pool_ns}});
  }
  j["size_classes"] = nlohmann::json::array();
  for (const SizeClass& c : size_classes) {
    j["size_classes"].push_back({{"min_bytes", c.min_bytes},
                                 {"max_bytes", c.max_bytes},
                                 {"allocs", c.allocs},
                                 {"bytes", c.bytes},
                                 {"cache_hits", c.cache_hits}});
  }
  return j;
}

}  // namespace genesis::profiler
