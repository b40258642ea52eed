#include "tools/genesis/device_report.h"

#include <unistd.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "genesis/core/absl_compat.h"
#include "genesis/core/byte_size.h"
#include "genesis/core/device.h"
#include "genesis/cuda/kernel_check.h"
#include "genesis/transfer/batch_plan.h"
#include "tools/genesis/text_table.h"

namespace genesis::cli {
namespace {

std::string ComputeCapability(const cuda::DeviceProperties& p) {
  return absl::StrCat(p.cc_major, ".", p.cc_minor);
}

std::string StatusText(const absl::Status& status) {
  return status.ok() ? "ok" : std::string(status.message());
}

}  // namespace

DeviceReport CollectDeviceReport(bool run_kernel_check) {
  DeviceReport report;
  report.built_with_cuda = cuda::BuiltWithCuda();
  report.kernels_compiled_in = cuda::KernelsCompiledIn();
  report.host_cpus = static_cast<int>(std::thread::hardware_concurrency());
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0) {
    report.host_memory_bytes = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
  }
  report.versions = cuda::GetVersions();
  const int count = cuda::DeviceCount();
  if (count == 0) report.no_device_reason = cuda::NoDeviceReason();
  for (int i = 0; i < count; ++i) {
    GpuReport gpu;
    gpu.index = i;
    if (auto props = cuda::GetDeviceProperties(i); props.ok()) {
      gpu.properties = *std::move(props);
    } else {
      gpu.properties.index = i;
      gpu.properties_error = props.status();
    }
    gpu.memory = cuda::GetMemoryInfo(i);
    if (run_kernel_check) gpu.kernel_check = cuda::CheckKernelLaunch(i);
    report.gpus.push_back(std::move(gpu));
  }
  if (count > 0) {
    if (auto matrix = cuda::PeerAccessMatrix(); matrix.ok()) {
      report.peer_access = *std::move(matrix);
    } else {
      report.peer_access_error = matrix.status();
    }
  }
  return report;
}

std::vector<CopyPath> CopyPaths(const DeviceReport& report) {
  std::vector<CopyPath> paths;
  const int n = static_cast<int>(report.gpus.size());
  transfer::Topology topology;
  topology.device_count = n;
  if (report.peer_access.size() == static_cast<size_t>(n)) {
    topology.peer_access = report.peer_access;
  }
  topology.batch_memcpy_available =
      report.versions.runtime >= 12080 && report.versions.driver >= 12080;
  // Made-up addresses: planning looks at sizes and devices, never at the memory.
  const auto mechanism = [&](Device from, Device to, size_t bytes, int count,
                             bool pinned) -> std::string {
    std::vector<transfer::CopyRequest> requests;
    for (int k = 0; k < count; ++k) {
      const uintptr_t offset = static_cast<uintptr_t>(k) * bytes;
      requests.push_back({.src = reinterpret_cast<const void*>(uintptr_t{1} << 44 | offset),
                          .src_device = from,
                          .src_pinned = pinned,
                          .dst = reinterpret_cast<void*>(uintptr_t{1} << 45 | offset),
                          .dst_device = to,
                          .dst_pinned = pinned,
                          .bytes = bytes});
    }
    absl::StatusOr<transfer::BatchPlan> plan = transfer::PlanBatch(requests, topology);
    if (!plan.ok()) return StatusText(plan.status());
    std::string out;
    for (const transfer::CopyGroup& group : plan->groups) {
      absl::StrAppend(&out, out.empty() ? "" : " + ",
                      ToAbsl(transfer::MechanismName(group.mechanism)));
    }
    return out;
  };
  const auto add = [&](Device from, Device to) {
    const bool host = from.is_cpu() || to.is_cpu();
    paths.push_back({from.ToString(), to.ToString(),
                     mechanism(from, to, size_t{64} << 10, 1024, true),
                     mechanism(from, to, size_t{256} << 20, 1, true),
                     host ? mechanism(from, to, size_t{256} << 20, 1, false) : ""});
  };
  for (int i = 0; i < n; ++i) add(Device::Cpu(), Device::Cuda(i));
  for (int i = 0; i < n; ++i) add(Device::Cuda(i), Device::Cpu());
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) add(Device::Cuda(i), Device::Cuda(j));
  }
  return paths;
}

std::string FormatDeviceReport(const DeviceReport& report) {
  std::string out = absl::StrCat(
      "genesis: ", report.built_with_cuda ? "built with CUDA" : "CPU-only build (no CUDA)",
      "; ", cuda::FormatVersions(report.versions), "\n");
  absl::StrAppend(&out, "host: ", report.host_cpus, " CPUs, ",
                  FormatByteSize(report.host_memory_bytes), " memory\n");
  if (report.gpus.empty()) {
    absl::StrAppend(&out, "GPUs: none (", report.no_device_reason, ")\n");
    return out;
  }
  absl::StrAppend(&out, "GPUs: ", report.gpus.size(), "\n\n");
  TextTable gpus({"device", "name", "cc", "memory free / total", "SMs", "copy engines",
                  "PCI bus", "kernels"});
  for (const GpuReport& gpu : report.gpus) {
    const cuda::DeviceProperties& p = gpu.properties;
    if (!gpu.properties_error.ok()) {
      gpus.AddRow({absl::StrCat("cuda:", gpu.index), StatusText(gpu.properties_error)});
      continue;
    }
    const std::string memory =
        gpu.memory.ok() ? absl::StrCat(FormatByteSize(gpu.memory->free_bytes), " / ",
                                       FormatByteSize(gpu.memory->total_bytes))
                        : absl::StrCat("? / ", FormatByteSize(p.total_memory));
    gpus.AddRow({absl::StrCat("cuda:", gpu.index), p.name, ComputeCapability(p), memory,
                 absl::StrCat(p.multiprocessors), absl::StrCat(p.async_copy_engines),
                 p.pci_bus_id, StatusText(gpu.kernel_check)});
  }
  absl::StrAppend(&out, gpus.Render(2));
  if (!report.peer_access_error.ok()) {
    absl::StrAppend(&out, "\npeer access: ", StatusText(report.peer_access_error), "\n");
  } else if (report.gpus.size() > 1) {
    std::vector<std::string> header = {"from \\ to"};
    for (const GpuReport& gpu : report.gpus) header.push_back(absl::StrCat("cuda:", gpu.index));
    TextTable peers(header);
    for (size_t i = 0; i < report.peer_access.size(); ++i) {
      std::vector<std::string> row = {absl::StrCat("cuda:", i)};
      for (size_t j = 0; j < report.peer_access[i].size(); ++j) {
        row.push_back(i == j ? "-" : (report.peer_access[i][j] ? "yes" : "no"));
      }
      peers.AddRow(std::move(row));
    }
    absl::StrAppend(&out, "\npeer access (can the row device read the column device):\n",
                    peers.Render(2));
  }
  TextTable paths({"from", "to", "1024 x 64 KiB", "256 MiB", "256 MiB pageable"});
  for (const CopyPath& p : CopyPaths(report)) {
    paths.AddRow({p.from, p.to, p.many_small, p.large,
                  p.large_pageable.empty() ? "-" : p.large_pageable});
  }
  absl::StrAppend(&out, "\ncopy paths (the batch copier's mechanism; host memory pinned "
                        "unless pageable):\n",
                  paths.Render(2));
  return out;
}

nlohmann::json DeviceReportToJson(const DeviceReport& report) {
  using nlohmann::json;
  const cuda::Versions& v = report.versions;
  json out = {
      {"built_with_cuda", report.built_with_cuda},
      {"kernels_compiled_in", report.kernels_compiled_in},
      {"host", {{"cpus", report.host_cpus}, {"memory_bytes", report.host_memory_bytes}}},
      {"versions",
       {{"cuda_runtime", cuda::FormatCudaVersion(v.runtime)},
        {"cuda_runtime_code", v.runtime},
        {"cuda_driver", cuda::FormatCudaVersion(v.driver)},
        {"cuda_driver_code", v.driver},
        {"nccl", cuda::FormatNcclVersion(v.nccl)},
        {"nccl_code", v.nccl},
        {"nccl_error", v.nccl_error}}},
      {"device_count", report.gpus.size()},
      {"no_device_reason", report.no_device_reason},
  };
  json devices = json::array();
  for (const GpuReport& gpu : report.gpus) {
    const cuda::DeviceProperties& p = gpu.properties;
    json d = {{"device", absl::StrCat("cuda:", gpu.index)}, {"index", gpu.index}};
    if (!gpu.properties_error.ok()) {
      d["error"] = gpu.properties_error.ToString();
    } else {
      d.update({{"name", p.name},
                {"compute_capability", ComputeCapability(p)},
                {"total_memory_bytes", p.total_memory},
                {"multiprocessors", p.multiprocessors},
                {"copy_engines", p.async_copy_engines},
                {"pci_bus_id", p.pci_bus_id},
                {"uuid", p.uuid},
                {"l2_cache_bytes", p.l2_cache_bytes},
                {"memory_bus_width_bits", p.memory_bus_width_bits},
                {"memory_pools", p.memory_pools},
                {"unified_addressing", p.unified_addressing}});
    }
    if (gpu.memory.ok()) {
      d["free_memory_bytes"] = gpu.memory->free_bytes;
    } else {
      d["free_memory_error"] = gpu.memory.status().ToString();
    }
    d["kernel_check"] = StatusText(gpu.kernel_check);
    devices.push_back(std::move(d));
  }
  out["devices"] = std::move(devices);
  out["peer_access"] = report.peer_access;
  json paths = json::array();
  for (const CopyPath& p : CopyPaths(report)) {
    paths.push_back({{"from", p.from},
                     {"to", p.to},
                     {"many_small", p.many_small},
                     {"large", p.large},
                     {"large_pageable", p.large_pageable}});
  }
  out["copy_paths"] = std::move(paths);
  if (!report.peer_access_error.ok()) {
    out["peer_access_error"] = report.peer_access_error.ToString();
  }
  return out;
}

}  // namespace genesis::cli
