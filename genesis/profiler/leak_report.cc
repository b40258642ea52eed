#include "genesis/profiler/leak_report.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "genesis/core/byte_size.h"
#include "genesis/profiler/symbolize.h"

namespace genesis::profiler {
namespace {

struct Tracked {
  const Event* alloc = nullptr;
  const Event* free = nullptr;
};

// Every allocation of the history, in order, paired with its free if recorded.
std::vector<Tracked> PairAllocations(const History& h) {
  std::vector<Tracked> out;
  absl::flat_hash_map<std::pair<int, uint64_t>, size_t> live;
  for (const Event& e : h.events) {
    if (e.kind == EventKind::kAlloc) {
      live[{e.source, e.address}] = out.size();
      out.push_back({&e, nullptr});
    } else if (e.kind == EventKind::kFree) {
      auto it = live.find({e.source, e.address});
      if (it == live.end()) continue;  // Allocated before recording began.
      out[it->second].free = &e;
      live.erase(it);
    }
  }
  return out;
}

LiveAllocation Describe(const History& h, const Tracked& t, Symbolizer& symbolizer) {
  LiveAllocation a;
  const Event& e = *t.alloc;
  a.pool = e.source >= 0 && e.source < static_cast<int>(h.sources.size())
               ? SourceLabel(h.sources[e.source])
               : "?";
  a.address = e.address;
  a.size = e.size;
  a.requested = e.requested;
  a.age_ns = h.end_ns - e.time_ns;
  a.freed = t.free != nullptr;
  if (a.freed) a.lifetime_ns = t.free->time_ns - e.time_ns;
  static const std::vector<uintptr_t> kNone;
  const std::vector<uintptr_t>& stack = e.stack >= 0 ? h.stacks[e.stack] : kNone;
  a.site = symbolizer.CallSite(stack).ToString();
  for (const Frame& f : symbolizer.Frames(stack)) a.stack.push_back(f.ToString());
  return a;
}

std::string Human(uint64_t n) { return FormatByteSize(n); }

nlohmann::json AllocationJson(const LiveAllocation& a) {
  nlohmann::json j = {{"pool", a.pool},           {"address", absl::StrCat("0x", absl::Hex(a.address))},
                      {"size", a.size},           {"requested", a.requested},
                      {"age_ns", a.age_ns},       {"site", a.site},
                      {"stack", a.stack}};
  if (a.freed) j["lifetime_ns"] = a.lifetime_ns;
  j["freed"] = a.freed;
  return j;
}

}  // namespace

LeakReport CheckMemoryLeaks(const History& history, bool symbolize_file_lines) {
  Symbolizer symbolizer(symbolize_file_lines);
  symbolizer.Resolve(history.stacks);
  LeakReport report;
  report.dropped_events = history.dropped_events;
  std::map<std::string, LeakSite> sites;
  for (const Tracked& t : PairAllocations(history)) {
    if (t.free != nullptr) continue;
    LiveAllocation a = Describe(history, t, symbolizer);
    LeakSite& s = sites[a.site];
    s.site = a.site;
    ++s.count;
    s.bytes += a.size;
    s.oldest_age_ns = std::max(s.oldest_age_ns, a.age_ns);
    ++report.count;
    report.bytes += a.size;
    s.allocations.push_back(std::move(a));
  }
  for (auto& [name, site] : sites) report.sites.push_back(std::move(site));
  std::stable_sort(report.sites.begin(), report.sites.end(),
                   [](const LeakSite& a, const LeakSite& b) { return a.bytes > b.bytes; });
  return report;
}

std::string LeakReport::ToText() const {
  std::string s;
  if (count == 0) {
    s = "No leaks: every allocation made while recording was freed.\n";
  } else {
    s = absl::StrFormat("%d live allocation(s), %s, from %d call site(s):\n", count,
                        Human(bytes), sites.size());
    for (const LeakSite& site : sites) {
      absl::StrAppend(&s, absl::StrFormat("  %s: %d allocation(s), %s, oldest %.3f ms\n",
                                          site.site, site.count, Human(site.bytes),
                                          site.oldest_age_ns / 1e6));
      for (const LiveAllocation& a : site.allocations) {
        absl::StrAppend(&s, absl::StrFormat("    %s 0x%x: %s (%d bytes asked), age %.3f ms\n",
                                            a.pool, a.address, Human(a.size), a.requested,
                                            a.age_ns / 1e6));
      }
    }
  }
  if (dropped_events > 0) {
    absl::StrAppend(&s, absl::StrFormat(
                            "Warning: %d event(s) were dropped from full rings; allocations "
                            "whose free was dropped appear live. Enlarge ring_events.\n",
                            dropped_events));
  }
  return s;
}

nlohmann::json LeakReport::ToJson() const {
  nlohmann::json j;
  j["count"] = count;
  j["bytes"] = bytes;
  j["dropped_events"] = dropped_events;
  j["sites"] = nlohmann::json::array();
  for (const LeakSite& site : sites) {
    nlohmann::json js = {{"site", site.site},
                         {"count", site.count},
                         {"bytes", site.bytes},
                         {"oldest_age_ns", site.oldest_age_ns}};
    js["allocations"] = nlohmann::json::array();
    for (const LiveAllocation& a : site.allocations) js["allocations"].push_back(AllocationJson(a));
    j["sites"].push_back(std::move(js));
  }
  return j;
}

std::vector<LiveAllocation> LargeAllocations(const History& history, uint64_t min_bytes,
                                             bool symbolize_file_lines) {
  Symbolizer symbolizer(symbolize_file_lines);
  std::vector<LiveAllocation> out;
  for (const Tracked& t : PairAllocations(history)) {
    if (t.alloc->size >= min_bytes) out.push_back(Describe(history, t, symbolizer));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const LiveAllocation& a, const LiveAllocation& b) { return a.size > b.size; });
  return out;
}

std::string LargeAllocationsText(const std::vector<LiveAllocation>& allocations) {
  std::string s = absl::StrFormat("%d large allocation(s):\n", allocations.size());
  for (const LiveAllocation& a : allocations) {
    absl::StrAppend(&s, absl::StrFormat("  %10s %s 0x%x %s  %s\n", Human(a.size), a.pool,
                                        a.address,
                                        a.freed ? absl::StrFormat("freed after %.3f ms",
                                                                  a.lifetime_ns / 1e6)
                                                : std::string("live"),
                                        a.site));
  }
  return s;
}

nlohmann::json LargeAllocationsJson(const std::vector<LiveAllocation>& allocations) {
  nlohmann::json j = nlohmann::json::array();
  for (const LiveAllocation& a : allocations) j.push_back(AllocationJson(a));
  return j;
}

}  // namespace genesis::profiler
