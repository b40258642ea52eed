#include "tools/genesis/info_command.h"

#include <cstdio>

#include "absl/flags/flag.h"
#include "genesis/cuda/device_query.h"
#include "genesis/distributed/launch_env.h"
#include "tools/genesis/cli_flags.h"
#include "tools/genesis/device_report.h"
#include "tools/genesis/distributed_report.h"

ABSL_FLAG(bool, kernel_check, true,
          "info: launch a small kernel on each GPU to prove this build's code runs there");

namespace genesis::cli {

int RunInfo(absl::Span<const std::string> args) {
  if (!args.empty()) {
    std::fprintf(stderr, "genesis info: unexpected argument '%s'\n", args[0].c_str());
    return 2;
  }
  const DeviceReport report = CollectDeviceReport(absl::GetFlag(FLAGS_kernel_check));
  std::string nccl = cuda::FormatNcclVersion(report.versions.nccl);
  if (report.versions.nccl <= 0 && !report.versions.nccl_error.empty()) {
    nccl += " (" + report.versions.nccl_error + ")";
  } else if (!report.versions.nccl_library.empty()) {
    nccl += " from " + report.versions.nccl_library;
  }
  const DistributedReport distributed =
      CollectDistributedReport(distributed::ProcessEnv(), std::move(nccl));
  if (absl::GetFlag(FLAGS_json)) {
    nlohmann::json json = DeviceReportToJson(report);
    json["distributed"] = DistributedReportToJson(distributed);
    std::printf("%s\n", json.dump(2).c_str());
  } else {
    std::printf("%s\n%s", FormatDeviceReport(report).c_str(),
                FormatDistributedReport(distributed).c_str());
  }
  bool usable = report.peer_access_error.ok();
  for (const GpuReport& gpu : report.gpus) {
    usable = usable && gpu.properties_error.ok() && gpu.memory.ok() &&
             (gpu.kernel_check.ok() || !absl::GetFlag(FLAGS_kernel_check));
  }
  return usable ? 0 : 1;
}

}  // namespace genesis::cli
