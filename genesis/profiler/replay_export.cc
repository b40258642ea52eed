#include "genesis/profiler/replay_export.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace genesis::profiler {

absl::StatusOr<std::vector<replay::TraceEvent>> ToReplayTrace(const History& history,
                                                              int source) {
  if (source < 0 || source >= static_cast<int>(history.sources.size())) {
    return absl::InvalidArgumentError(absl::StrCat("replay export: no pool ", source,
                                                   " in the history (it has ",
                                                   history.sources.size(), ")"));
  }
  std::vector<replay::TraceEvent> out;
  absl::flat_hash_set<uint64_t> live;
  int step = 0;
  for (const Event& e : history.events) {
    if (e.kind == EventKind::kMarker) {
      int n = 0;
      const std::string& name =
          e.aux >= 0 && e.aux < static_cast<int>(history.markers.size()) ? history.markers[e.aux]
                                                                         : "";
      if (absl::StartsWith(name, "step ") && absl::SimpleAtoi(name.substr(5), &n) && n >= 0) {
        step = n;
      }
      continue;
    }
    if (e.source != source) continue;
    replay::TraceEvent t;
    t.address = e.address;
    t.size = e.requested;
    t.stream = e.stream;
    t.step = step;
    if (e.kind == EventKind::kAlloc) {
      live.insert(e.address);
      t.action = replay::TraceAction::kAlloc;
      out.push_back(t);
    } else if (e.kind == EventKind::kFree) {
      if (live.erase(e.address) == 0) continue;
      t.action = replay::TraceAction::kFreeRequested;
      out.push_back(t);
      t.action = replay::TraceAction::kFreeCompleted;
      out.push_back(t);
    }
  }
  return out;
}

absl::Status WriteReplayTrace(const History& history, const std::string& path, int source,
                              bool gzip) {
  absl::StatusOr<std::vector<replay::TraceEvent>> events = ToReplayTrace(history, source);
  if (!events.ok()) return events.status();
  return replay::WriteTrace(path, *events, gzip);
}

}  // namespace genesis::profiler
