#include "tools/genesis/replay_command.h"

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
#include "genesis/replay/replayer.h"
#include "genesis/replay/trace.h"
#include "nlohmann/json.hpp"
#include "tools/genesis/cli_flags.h"
#include "tools/genesis/text_table.h"

ABSL_FLAG(std::string, alloc_conf, "",
          "replay: pool settings in GENESIS_ALLOC_CONF syntax (default: that variable)");
ABSL_FLAG(std::string, device, "host",
          "replay: 'host' (host emulation of device memory) or a GPU such as 'cuda:0'");

namespace genesis::cli {
namespace {

absl::StatusOr<memory::AllocConfig> ConfigFromFlags() {
  const std::string text = absl::GetFlag(FLAGS_alloc_conf);
  if (text.empty()) return memory::AllocConfigFromEnvironment();
  return memory::ParseAllocConfig(text);
}

absl::StatusOr<replay::ReplayResult> ReplayFile(const std::string& path,
                                                const memory::AllocConfig& config,
                                                const std::string& device) {
  GENESIS_ASSIGN_OR_RETURN(std::vector<replay::TraceEvent> events, replay::ReadTrace(path));
  replay::ReplayOptions options;
  options.name = path;
  if (device == "host") return replay::ReplayOnHost(events, config.options, options);
  GENESIS_ASSIGN_OR_RETURN(Device d, Device::Parse(device));
  if (!d.is_cuda()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--device=", device, ": expected 'host' or 'cuda:N'"));
  }
  GENESIS_ASSIGN_OR_RETURN(std::unique_ptr<memory::CachingAllocator> pool,
                           memory::CreatePool(d, config));
  return replay::Replay(events, *pool, options);
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
  TextTable table({"trace", "events", "peak allocated", "peak reserved", "reserved/allocated",
                   "reserved/live", "backend calls", "maps/unmaps", "ns/op"});
  TextTable step_table({"trace", "step", "events", "maps", "unmaps", "segment allocs",
                        "segment frees", "ns/op"});
  nlohmann::json rows = nlohmann::json::array();
  int exit_code = 0;
  for (const std::string& path : args) {
    const absl::StatusOr<replay::ReplayResult> r = ReplayFile(path, *config, device);
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
