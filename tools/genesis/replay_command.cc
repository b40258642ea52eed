#include "tools/genesis/replay_command.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "genesis/core/byte_size.h"
#include "genesis/core/device.h"
#include "genesis/core/status.h"
#include "genesis/memory/alloc_config.h"
#include "genesis/memory/pool_registry.h"
#include "genesis/memory/test_backend.h"
#include "genesis/profiler/chrome_trace.h"
#include "genesis/profiler/output_file.h"
#include "genesis/profiler/picture.h"
#include "genesis/profiler/recorder.h"
#include "genesis/replay/replayer.h"
#include "genesis/replay/trace.h"
#include "nlohmann/json.hpp"
#include "tools/genesis/cli_flags.h"
#include "tools/genesis/text_table.h"

ABSL_FLAG(std::string, alloc_conf, "",
          "replay: pool settings in GENESIS_ALLOC_CONF syntax (default: that variable)");
ABSL_FLAG(std::string, device, "host",
          "replay: 'host' (host emulation of device memory) or a GPU such as 'cuda:0'");
ABSL_FLAG(std::string, timeline, "",
          "replay: write the memory profile of the replay (one trace) as Chrome trace "
          "JSON here (Perfetto, chrome://tracing)");
ABSL_FLAG(std::string, picture, "",
          "replay: draw the memory profile of the replay (one trace) as a PNG here "
          "(needs python3 with matplotlib)");

namespace genesis::cli {
namespace {

absl::StatusOr<memory::AllocConfig> ConfigFromFlags() {
  const std::string text = absl::GetFlag(FLAGS_alloc_conf);
  if (text.empty()) return memory::AllocConfigFromEnvironment();
  return memory::ParseAllocConfig(text);
}

// Where the replay's memory profile goes (--timeline, --picture); empty: nowhere.
struct ProfileOutputs {
  std::string timeline;
  std::string picture;
  bool any() const { return !timeline.empty() || !picture.empty(); }
};

// Markers at the pool event that corresponds to the first trace event of each step run:
// the replay makes one pool call per alloc and per free_completed, in trace order.
void AddStepMarkers(const std::vector<replay::TraceEvent>& trace, profiler::History* h) {
  std::vector<size_t> calls;  // Index into h->events of each pool call.
  for (size_t i = 0; i < h->events.size(); ++i) {
    const profiler::EventKind k = h->events[i].kind;
    if (k == profiler::EventKind::kAlloc || k == profiler::EventKind::kFree) calls.push_back(i);
  }
  std::vector<profiler::Event> markers;
  size_t call = 0;
  int step = -1;
  for (const replay::TraceEvent& e : trace) {
    if (e.action == replay::TraceAction::kFreeRequested) continue;
    if (call >= calls.size()) break;
    if (e.step != step) {
      step = e.step;
      profiler::Event m;
      m.kind = profiler::EventKind::kMarker;
      m.time_ns = h->events[calls[call]].time_ns;
      m.thread = h->events[calls[call]].thread;
      m.aux = static_cast<int>(h->markers.size());
      h->markers.push_back(absl::StrCat("step ", step));
      markers.push_back(m);
    }
    ++call;
  }
  h->events.insert(h->events.end(), markers.begin(), markers.end());
  std::stable_sort(h->events.begin(), h->events.end(),
                   [](const profiler::Event& a, const profiler::Event& b) {
                     return a.time_ns < b.time_ns;
                   });
}

absl::Status WriteProfile(const std::string& path, const std::vector<replay::TraceEvent>& trace,
                          profiler::Recorder& recorder, const ProfileOutputs& out) {
  GENESIS_RETURN_IF_ERROR(recorder.Stop());
  profiler::History h = recorder.Collect();
  AddStepMarkers(trace, &h);
  if (!out.timeline.empty()) GENESIS_RETURN_IF_ERROR(profiler::WriteChromeTrace(h, out.timeline));
  if (!out.picture.empty()) {
    profiler::PictureOptions options;
    options.title = absl::StrCat("replay of ", path);
    GENESIS_RETURN_IF_ERROR(profiler::WritePicture(h, out.picture, options));
  }
  return absl::OkStatus();
}

absl::StatusOr<replay::ReplayResult> ReplayFile(const std::string& path,
                                                const memory::AllocConfig& config,
                                                const std::string& device,
                                                const ProfileOutputs& outputs) {
  GENESIS_ASSIGN_OR_RETURN(std::vector<replay::TraceEvent> events, replay::ReadTrace(path));
  replay::ReplayOptions options;
  options.name = path;
  if (device == "host" && !outputs.any()) {
    return replay::ReplayOnHost(events, config.options, options);
  }
  std::unique_ptr<memory::CachingAllocator> pool;
  std::string label = device;
  if (device == "host") {
    // As ReplayOnHost does, with a pool this command can watch.
    GENESIS_ASSIGN_OR_RETURN(
        pool, memory::CachingAllocator::Create(
                  memory::TestBackend::FakeCuda(
                      replay::kDefaultReplayCapacity,
                      config.options.expandable_segments != memory::ExpandableSegments::kOff),
                  config.options));
    label = "cuda:0 (host emulation)";
  } else {
    GENESIS_ASSIGN_OR_RETURN(Device d, Device::Parse(device));
    if (!d.is_cuda()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--device=", device, ": expected 'host' or 'cuda:N'"));
    }
    GENESIS_ASSIGN_OR_RETURN(pool, memory::CreatePool(d, config));
  }
  if (!outputs.any()) return replay::Replay(events, *pool, options);
  profiler::RecorderOptions recording;
  // Every event kept (two per trace event at most, plus segments), each with its own time.
  recording.ring_events = std::min<size_t>(size_t{1} << 24, 2 * events.size() + 4096);
  recording.fast_path_clock = profiler::FastPathClock::kExact;
  GENESIS_ASSIGN_OR_RETURN(std::unique_ptr<profiler::Recorder> recorder,
                           profiler::Recorder::Create(recording));
  GENESIS_RETURN_IF_ERROR(recorder->Attach(pool.get(), label, "replay"));
  absl::StatusOr<replay::ReplayResult> result = replay::Replay(events, *pool, options);
  if (!result.ok()) return result;
  GENESIS_RETURN_IF_ERROR(WriteProfile(path, events, *recorder, outputs));
  return result;
}

}  // namespace

int RunReplay(absl::Span<const std::string> args) {
  if (args.empty()) {
    std::fprintf(stderr,
                 "genesis replay: name one or more trace files (text or .gz), e.g.\n"
                 "  genesis replay traces/gpt2_small_train.trace.gz --alloc_conf=...\n");
    return 2;
  }
  const absl::StatusOr<memory::AllocConfig> config = ConfigFromFlags();
  if (!config.ok()) {
    std::fprintf(stderr, "genesis replay: %s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  const std::string device = absl::GetFlag(FLAGS_device);
  const bool json = absl::GetFlag(FLAGS_json);
  const ProfileOutputs outputs{absl::GetFlag(FLAGS_timeline), absl::GetFlag(FLAGS_picture)};
  if (outputs.any() && args.size() != 1) {
    std::fprintf(stderr, "genesis replay: --timeline and --picture take one trace, not %zu\n",
                 args.size());
    return 2;
  }
  // Unwritable outputs are found before the replay runs.
  for (const std::string& out : {outputs.timeline, outputs.picture}) {
    if (out.empty()) continue;
    if (absl::Status s = profiler::WriteOutputFile(out, ""); !s.ok()) {
      std::fprintf(stderr, "genesis replay: %s\n", std::string(s.message()).c_str());
      return 2;
    }
  }
  TextTable table({"trace", "events", "peak allocated", "peak reserved", "reserved/allocated",
                   "reserved/live", "backend calls", "maps/unmaps", "ns/op"});
  TextTable step_table({"trace", "step", "events", "maps", "unmaps", "segment allocs",
                        "segment frees", "ns/op"});
  nlohmann::json rows = nlohmann::json::array();
  int exit_code = 0;
  for (const std::string& path : args) {
    const absl::StatusOr<replay::ReplayResult> r = ReplayFile(path, *config, device, outputs);
    if (!r.ok()) {
      std::fprintf(stderr, "genesis replay: %s\n", r.status().ToString().c_str());
      exit_code = 1;
      continue;
    }
    table.AddRow({path, absl::StrCat(r->num_ops), FormatByteSize(r->peak_allocated),
                  FormatByteSize(r->peak_reserved),
                  absl::StrFormat("%.4f", r->reserved_over_allocated),
                  absl::StrFormat("%.4f", r->reserved_over_live),
                  absl::StrCat(r->backend_calls), absl::StrCat(r->maps, "/", r->unmaps),
                  absl::StrFormat("%.1f", r->ns_per_op)});
    rows.push_back({{"trace", path},
                    {"device", device},
                    {"events", r->num_ops},
                    {"peak_allocated_bytes", r->peak_allocated},
                    {"peak_reserved_bytes", r->peak_reserved},
                    {"reserved_over_allocated", r->reserved_over_allocated},
                    {"backend_calls", r->backend_calls},
                    {"segment_allocs", r->segment_allocs},
                    {"segment_frees", r->segment_frees},
                    {"maps", r->maps},
                    {"unmaps", r->unmaps},
                    {"reserved_over_live", r->reserved_over_live},
                    {"ns_per_op", r->ns_per_op},
                    {"trace_peak_live_bytes", r->trace_peak_live}});
    nlohmann::json steps = nlohmann::json::array();
    for (const replay::StepResult& st : r->steps) {
      step_table.AddRow({path, absl::StrCat(st.step), absl::StrCat(st.num_ops),
                         absl::StrCat(st.maps), absl::StrCat(st.unmaps),
                         absl::StrCat(st.segment_allocs), absl::StrCat(st.segment_frees),
                         absl::StrFormat("%.1f", st.ns_per_op)});
      steps.push_back({{"step", st.step},
                       {"events", st.num_ops},
                       {"maps", st.maps},
                       {"unmaps", st.unmaps},
                       {"segment_allocs", st.segment_allocs},
                       {"segment_frees", st.segment_frees},
                       {"ns_per_op", st.ns_per_op}});
    }
    rows.back()["steps"] = std::move(steps);
  }
  // Errors went to stderr above; with nothing replayed there is no table to print (a
  // header and an empty table after the errors would read as a result).
  std::fflush(stderr);
  if (rows.empty() && exit_code != 0) return exit_code;
  if (json) {
    std::printf("%s\n", rows.dump(2).c_str());
  } else {
    std::printf("replay on %s with %s\n\n%s", device.c_str(),
                memory::FormatAllocConfig(*config).c_str(), table.Render().c_str());
    if (step_table.num_rows() > 0) {
      std::printf("\nper step (traces with '# step <n>' markers; step 0 is setup):\n\n%s",
                  step_table.Render().c_str());
    }
  }
  return exit_code;
}

}  // namespace genesis::cli
