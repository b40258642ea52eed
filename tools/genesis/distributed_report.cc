#include "tools/genesis/distributed_report.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "genesis/distributed/gloo/gloo_communicator.h"

namespace genesis::cli {

DistributedReport CollectDistributedReport(const distributed::EnvLookup& lookup,
                                           std::string nccl_version) {
  DistributedReport report;
  report.env = distributed::ParseLaunchEnv(lookup);
  report.gloo_version = distributed::gloo_backend::GlooVersion();
  report.nccl_version = std::move(nccl_version);
  return report;
}

std::string FormatDistributedReport(const DistributedReport& report) {
  std::string text = "Distributed\n";
  if (report.env.ok()) {
    const distributed::LaunchEnv& e = *report.env;
    absl::StrAppend(&text, "  launcher   ", e.launcher, ": rank ", e.rank, " of ",
                    e.world_size, ", local rank ", e.local_rank, " of ", e.local_world_size,
                    ", master ", e.master_addr, ":", e.master_port,
                    e.run_id.empty() ? "" : absl::StrCat(", run ", e.run_id), "\n",
                    "  job key    ", e.job_key,
                    e.job_key_unique ? "" : " (may repeat from one launch to the next)", "\n");
  } else if (report.env.status().code() == absl::StatusCode::kNotFound) {
    absl::StrAppend(&text, "  launcher   none: a single process (",
                    report.env.status().message(), ")\n");
  } else {
    absl::StrAppend(&text, "  launcher   error: ", report.env.status().message(), "\n");
  }
  absl::StrAppend(&text, "  backends   NCCL ", report.nccl_version, " (GPU storages), Gloo ",
                  report.gloo_version, " (CPU storages)\n");
  return text;
}

nlohmann::json DistributedReportToJson(const DistributedReport& report) {
  nlohmann::json j;
  if (report.env.ok()) {
    const distributed::LaunchEnv& e = *report.env;
    j = {{"launcher", e.launcher},
         {"rank", e.rank},
         {"world_size", e.world_size},
         {"local_rank", e.local_rank},
         {"local_world_size", e.local_world_size},
         {"master_addr", e.master_addr},
         {"master_port", e.master_port},
         {"run_id", e.run_id},
         {"job_key", e.job_key},
         {"job_key_unique", e.job_key_unique}};
  } else {
    j = {{"launcher", nullptr}, {"reason", std::string(report.env.status().message())}};
  }
  j["nccl"] = report.nccl_version;
  j["gloo"] = report.gloo_version;
  return j;
}

}  // namespace genesis::cli
