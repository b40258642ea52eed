#include "genesis/profiler/picture.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "genesis/core/byte_size.h"
#include "genesis/profiler/output_file.h"
#include "genesis/profiler/symbolize.h"
#include "genesis/profiler/timeline.h"

namespace genesis::profiler {
namespace internal {
extern const char kPlotMemoryScript[];
}  // namespace internal
namespace {

using nlohmann::json;

// Runs `command`; its exit status (or -1) and what it printed.
int Run(const std::string& command, std::string* output) {
  FILE* f = popen((command + " 2>&1").c_str(), "r");
  if (f == nullptr) return -1;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) output->append(buf, n);
  const int status = pclose(f);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string TempPath(const std::string& suffix) {
  const char* dir = std::getenv("TMPDIR");
  std::string pattern = absl::StrCat(dir != nullptr && *dir ? dir : "/tmp",
                                     "/genesis_picture_XXXXXX", suffix);
  const int fd = mkstemps(pattern.data(), static_cast<int>(suffix.size()));
  if (fd < 0) return "";
  close(fd);
  return pattern;
}

}  // namespace

json PictureData(const History& h, const PictureOptions& options) {
  const std::vector<SourceTimeline> timeline = BuildTimeline(h);
  json sources = json::array();
  int peak_source = -1;
  for (size_t s = 0; s < timeline.size(); ++s) {
    json t = json::array(), a = json::array(), r = json::array();
    for (const TimelinePoint& p : timeline[s].points) {
      t.push_back((p.time_ns - h.start_ns) / 1e6);
      a.push_back(p.allocated);
      r.push_back(p.reserved);
    }
    // Close the steps at the end of the history.
    t.push_back((h.end_ns - h.start_ns) / 1e6);
    a.push_back(timeline[s].points.back().allocated);
    r.push_back(timeline[s].points.back().reserved);
    sources.push_back({{"label", SourceLabel(h.sources[s])},
                       {"t_ms", std::move(t)},
                       {"allocated", std::move(a)},
                       {"reserved", std::move(r)},
                       {"peak_allocated", timeline[s].peak_allocated},
                       {"peak_t_ms", (timeline[s].peak_allocated_ns - h.start_ns) / 1e6}});
    if (peak_source < 0 || timeline[s].peak_allocated > timeline[peak_source].peak_allocated) {
      peak_source = static_cast<int>(s);
    }
  }
  json markers = json::array();
  for (const Event& e : h.events) {
    if (e.kind != EventKind::kMarker) continue;
    markers.push_back({{"t_ms", (e.time_ns - h.start_ns) / 1e6},
                       {"name", e.aux >= 0 && e.aux < static_cast<int>(h.markers.size())
                                    ? h.markers[e.aux]
                                    : "?"}});
  }
  // Blocks alive at the peak of the pool with the highest peak, by call site.
  json sites = json::array();
  std::string peak_title = "no allocations recorded";
  if (peak_source >= 0) {
    const int64_t peak_ns = timeline[peak_source].peak_allocated_ns;
    absl::flat_hash_map<uint64_t, const Event*> live;
    for (const Event& e : h.events) {
      if (e.time_ns > peak_ns) break;
      if (e.source != peak_source) continue;
      if (e.kind == EventKind::kAlloc) live[e.address] = &e;
      if (e.kind == EventKind::kFree) live.erase(e.address);
    }
    Symbolizer symbolizer;
    symbolizer.Resolve(h.stacks);
    std::map<std::string, std::pair<uint64_t, int64_t>> by_site;
    static const std::vector<uintptr_t> kNone;
    for (const auto& [address, e] : live) {
      const std::string site =
          symbolizer.CallSite(e->stack >= 0 ? h.stacks[e->stack] : kNone).ToString();
      by_site[site].first += e->size;
      ++by_site[site].second;
    }
    std::vector<std::pair<std::string, std::pair<uint64_t, int64_t>>> sorted(by_site.begin(),
                                                                             by_site.end());
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
    if (static_cast<int>(sorted.size()) > options.max_sites) sorted.resize(options.max_sites);
    for (const auto& [site, v] : sorted) {
      sites.push_back({{"site", site}, {"bytes", v.first}, {"count", v.second}});
    }
    peak_title = absl::StrCat("Blocks alive at the peak of ", SourceLabel(h.sources[peak_source]),
                              " (", FormatByteSize(timeline[peak_source].peak_allocated),
                              " at ", (peak_ns - h.start_ns) / 1e6, " ms), by call site");
  }
  return {{"width", options.width},   {"height", options.height}, {"dpi", options.dpi},
          {"title", options.title},   {"sources", std::move(sources)},
          {"markers", std::move(markers)}, {"peak_sites", std::move(sites)},
          {"peak_title", peak_title}};
}

absl::Status WritePicture(const History& history, const std::string& path,
                          const PictureOptions& options) {
  for (int v : {options.width, options.height}) {
    if (v < 100 || v > 10000) {
      return absl::InvalidArgumentError(
          absl::StrCat("picture: width and height must be 100 to 10000 pixels, not ", v));
    }
  }
  if (options.dpi < 10 || options.dpi > 1000) {
    return absl::InvalidArgumentError(absl::StrCat("picture: dpi must be 10 to 1000, not ",
                                                   options.dpi));
  }
  if (path.find('\'') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("picture: path with a quote: ", path));
  }
  // An unwritable path is reported as such, before Python is looked for.
  if (absl::Status s = WriteOutputFile(path, ""); !s.ok()) return s;
  const std::string data = TempPath(".json");
  const std::string script = TempPath(".py");
  if (data.empty() || script.empty()) {
    return absl::InternalError("picture: cannot create a temporary file (TMPDIR)");
  }
  absl::Status status = WriteOutputFile(data, PictureData(history, options).dump());
  if (status.ok()) status = WriteOutputFile(script, internal::kPlotMemoryScript);
  std::vector<std::string> tried;
  bool drawn = false;
  if (status.ok()) {
    std::vector<std::string> pythons;
    if (const char* p = std::getenv("GENESIS_PYTHON"); p != nullptr && *p) pythons.push_back(p);
    pythons.push_back("python3");
    pythons.push_back("/usr/bin/python3");
    for (const std::string& python : pythons) {
      if (python.find('\'') != std::string::npos) continue;
      std::string output;
      const int rc =
          Run(absl::StrCat("'", python, "' '", script, "' '", data, "' '", path, "'"), &output);
      if (rc == 0) {
        drawn = true;
        break;
      }
      if (rc == 3 || rc == 127 || rc == 126) {
        tried.push_back(absl::StrCat(python, rc == 3 ? " (no matplotlib)" : " (not found)"));
        continue;
      }
      status = absl::InternalError(
          absl::StrCat("picture: ", python, " failed drawing '", path, "' (exit ", rc, "): ", output));
      break;
    }
  }
  unlink(data.c_str());
  unlink(script.c_str());
  if (!status.ok()) return status;
  if (!drawn) {
    unlink(path.c_str());
    return absl::FailedPreconditionError(absl::StrCat(
        "picture: drawing needs python3 with matplotlib (Debian: apt-get install "
        "python3-matplotlib; or set GENESIS_PYTHON); tried ", absl::StrJoin(tried, ", ")));
  }
  return absl::OkStatus();
}

}  // namespace genesis::profiler
