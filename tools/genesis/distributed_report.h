// The distributed environment `genesis info` reports: where this process sits in a job
// (the launcher's variables, or why it is not in one) and the collectives libraries.
#ifndef GENESIS_TOOLS_GENESIS_DISTRIBUTED_REPORT_H_
#define GENESIS_TOOLS_GENESIS_DISTRIBUTED_REPORT_H_

#include <string>

#include "absl/status/statusor.h"
#include "genesis/distributed/launch_env.h"
#include "nlohmann/json.hpp"

namespace genesis::cli {

struct DistributedReport {
  // The launcher's environment, or why there is none (NotFound: a single process) or
  // what is wrong with it.
  absl::StatusOr<distributed::LaunchEnv> env = absl::NotFoundError("not read");
  std::string gloo_version;
  // "2.28.9", or why NCCL is unavailable.
  std::string nccl_version;
};

// Reads the environment through `lookup`; `nccl_version` is what the device report
// found (cuda::FormatNcclVersion, with its reason if none).
DistributedReport CollectDistributedReport(const distributed::EnvLookup& lookup,
                                           std::string nccl_version);

// A "Distributed" section of text lines.
std::string FormatDistributedReport(const DistributedReport& report);

// {"launcher", "rank", "world_size", "local_rank", "local_world_size", "master_addr",
// "master_port", "run_id", "job_key", "job_key_unique"} when launched,
// {"launcher": null, "reason": ...} otherwise; plus "nccl" and "gloo" versions.
nlohmann::json DistributedReportToJson(const DistributedReport& report);

}  // namespace genesis::cli

#endif  // GENESIS_TOOLS_GENESIS_DISTRIBUTED_REPORT_H_
