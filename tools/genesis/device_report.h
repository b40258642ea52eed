// What `genesis info` reports: the host, the CUDA devices, their memory and peer access,
// the CUDA/NCCL versions, whether this build's kernels run on each GPU, and the path
// the batch copier (genesis/transfer) takes between each pair of devices.
//
// Collecting (CollectDeviceReport) is separate from rendering (FormatDeviceReport for
// people, DeviceReportToJson for machines), so rendering is tested on made-up machines
// and benchmark reports can embed the same description of where they ran.
#ifndef GENESIS_TOOLS_GENESIS_DEVICE_REPORT_H_
#define GENESIS_TOOLS_GENESIS_DEVICE_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "genesis/cuda/device_query.h"
#include "nlohmann/json.hpp"

namespace genesis::cli {

struct GpuReport {
  int index = 0;
  // Properties as far as the runtime answered; `properties_error` is OK when it did.
  cuda::DeviceProperties properties;
  absl::Status properties_error;
  absl::StatusOr<cuda::MemoryInfo> memory = absl::UnknownError("not queried");
  // OK if a kernel of this binary ran there and produced the right output.
  absl::Status kernel_check = absl::UnknownError("not run");
};

struct DeviceReport {
  bool built_with_cuda = false;
  bool kernels_compiled_in = false;
  int host_cpus = 0;
  uint64_t host_memory_bytes = 0;
  cuda::Versions versions;
  std::string no_device_reason;  // Empty when there are GPUs.
  std::vector<GpuReport> gpus;
  // peer_access[i][j]: GPU i can access GPU j's memory. Empty without GPUs.
  std::vector<std::vector<bool>> peer_access;
  absl::Status peer_access_error;
};

// How the batch copier would move data from one device to another (the mechanisms of
// transfer::PlanBatch with the default options on the report's topology).
struct CopyPath {
  std::string from;            // "cpu", "cuda:0"
  std::string to;
  std::string many_small;      // 1,024 copies of 64 KiB (pinned host memory).
  std::string large;           // One copy of 256 MiB (pinned host memory).
  std::string large_pageable;  // One copy of 256 MiB of pageable host memory; "" for GPU to GPU.
};

// One row per pair: host to each GPU, each GPU to the host, within each GPU, and each
// GPU to each other one. Empty without GPUs. Never touches memory or CUDA.
std::vector<CopyPath> CopyPaths(const DeviceReport& report);

// Asks the host and the CUDA runtime. Never fails or aborts: what could not be learned
// is recorded in the report as a status. With `run_kernel_check`, also launches the
// kernel self-test on each GPU (creating its CUDA context).
DeviceReport CollectDeviceReport(bool run_kernel_check);

// Readable tables: versions, host, one row per GPU, the peer-access matrix and the copy
// paths.
std::string FormatDeviceReport(const DeviceReport& report);

// The same facts as JSON; sizes in bytes, versions both as codes and as strings, errors
// as their status text. Keys are stable: scripts read them.
nlohmann::json DeviceReportToJson(const DeviceReport& report);

}  // namespace genesis::cli

#endif  // GENESIS_TOOLS_GENESIS_DEVICE_REPORT_H_
