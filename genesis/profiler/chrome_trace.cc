#include "genesis/profiler/chrome_trace.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "genesis/profiler/output_file.h"
#include "genesis/profiler/timeline.h"

namespace genesis::profiler {
namespace {

using nlohmann::json;

std::string Hex(uint64_t v) { return absl::StrCat("0x", absl::Hex(v)); }

}  // namespace

json ChromeTrace(const History& h, const ChromeTraceOptions& options) {
  json events = json::array();
  auto us = [&h](int64_t ns) { return static_cast<double>(ns - h.start_ns) / 1000.0; };
  // Small thread ids in order of appearance (Perfetto shows them as rows).
  absl::flat_hash_map<uint64_t, int> tids;
  auto tid = [&tids](uint64_t thread) {
    auto [it, inserted] = tids.try_emplace(thread, static_cast<int>(tids.size()) + 1);
    return it->second;
  };
  for (size_t s = 0; s < h.sources.size(); ++s) {
    const int pid = static_cast<int>(s) + 1;
    events.push_back({{"ph", "M"}, {"name", "process_name"}, {"ts", 0}, {"pid", pid},
                      {"tid", 0}, {"args", {{"name", SourceLabel(h.sources[s])}}}});
  }
  // Counters.
  const std::vector<SourceTimeline> timeline = BuildTimeline(h);
  for (size_t s = 0; s < timeline.size(); ++s) {
    for (const TimelinePoint& p : timeline[s].points) {
      events.push_back({{"ph", "C"}, {"name", "memory"}, {"ts", us(p.time_ns)},
                        {"pid", static_cast<int>(s) + 1}, {"tid", 0},
                        {"args", {{"allocated", p.allocated}, {"reserved", p.reserved},
                                  {"active", p.allocated}}}});
    }
  }
  // Segments, maps and long allocations as async slices; OOMs and markers as instants.
  struct Open {
    const Event* begin;
    std::string cat;
  };
  absl::flat_hash_map<std::pair<int, uint64_t>, Open> segments, maps, allocs;
  json slices = json::array();
  uint64_t next_id = 1;
  auto emit = [&](const Event& b, int64_t end_ns, const std::string& cat,
                  const std::string& name, json args) {
    const uint64_t id = next_id++;
    const int pid = b.source + 1;
    slices.push_back({{"ph", "b"}, {"cat", cat}, {"name", name}, {"id", Hex(id)},
                      {"ts", us(b.time_ns)}, {"pid", pid}, {"tid", tid(b.thread)},
                      {"args", std::move(args)}});
    slices.push_back({{"ph", "e"}, {"cat", cat}, {"name", name}, {"id", Hex(id)},
                      {"ts", us(end_ns)}, {"pid", pid}, {"tid", tid(b.thread)}});
  };
  auto close = [&](absl::flat_hash_map<std::pair<int, uint64_t>, Open>& open, const Event& e,
                   int64_t end_ns) {
    auto it = open.find({e.source, e.address});
    if (it == open.end()) return;
    const Event& b = *it->second.begin;
    const std::string cat = it->second.cat;
    open.erase(it);
    if (cat == "allocation" && b.size < options.long_allocation_bytes &&
        end_ns - b.time_ns < options.long_allocation_ns) {
      return;
    }
    emit(b, end_ns, cat,
         absl::StrCat(cat == "allocation" ? "block " : cat + " ", b.size, " B"),
         {{"address", Hex(b.address)}, {"size", b.size}, {"requested", b.requested},
          {"stream", b.stream}});
  };
  for (const Event& e : h.events) {
    switch (e.kind) {
      case EventKind::kSegmentAlloc:
        segments[{e.source, e.address}] = {&e, "segment"};
        break;
      case EventKind::kSegmentFree:
        close(segments, e, e.time_ns);
        break;
      case EventKind::kSegmentMap:
        maps[{e.source, e.address}] = {&e, "map"};
        break;
      case EventKind::kSegmentUnmap:
        close(maps, e, e.time_ns);
        break;
      case EventKind::kAlloc:
        allocs[{e.source, e.address}] = {&e, "allocation"};
        break;
      case EventKind::kFree:
        close(allocs, e, e.time_ns);
        break;
      case EventKind::kOom: {
        json args = {{"requested", e.requested}, {"rounded", e.size}, {"stream", e.stream}};
        if (e.aux >= 0 && e.aux < static_cast<int>(h.oom_states.size())) {
          const memory::MemoryStats& st = h.oom_states[e.aux];
          args["allocated"] = st.all.allocated_bytes.current;
          args["reserved"] = st.all.reserved_bytes.current;
          args["largest_free_block"] = st.largest_free_block;
        }
        events.push_back({{"ph", "i"}, {"s", "p"}, {"name", "out of memory"},
                          {"ts", us(e.time_ns)}, {"pid", e.source + 1},
                          {"tid", tid(e.thread)}, {"args", std::move(args)}});
        break;
      }
      case EventKind::kMarker: {
        const std::string name =
            e.aux >= 0 && e.aux < static_cast<int>(h.markers.size()) ? h.markers[e.aux] : "?";
        events.push_back({{"ph", "i"}, {"s", "g"}, {"name", name}, {"ts", us(e.time_ns)},
                          {"pid", 0}, {"tid", tid(e.thread)}});
        break;
      }
    }
  }
  // What is still open lives to the end.
  Event end;
  end.time_ns = h.end_ns;
  for (auto* open : {&segments, &maps, &allocs}) {
    std::vector<std::pair<int, uint64_t>> keys;
    for (const auto& [key, o] : *open) keys.push_back(key);
    std::sort(keys.begin(), keys.end());
    for (const auto& key : keys) {
      end.source = key.first;
      end.address = key.second;
      close(*open, end, h.end_ns);
    }
  }
  for (json& s : slices) events.push_back(std::move(s));
  return {{"traceEvents", std::move(events)},
          {"displayTimeUnit", "ms"},
          {"otherData",
           {{"generator", "genesis profiler"},
            {"dropped_events", h.dropped_events},
            {"time_resolution_ns", h.time_resolution_ns}}}};
}

absl::Status WriteChromeTrace(const History& history, const std::string& path,
                              const ChromeTraceOptions& options) {
  return WriteOutputFile(path, ChromeTrace(history, options).dump());
}

}  // namespace genesis::profiler
