// Device queries of a build with CUDA (the CPU-only build uses runtime_nocuda.cc).

#include "genesis/cuda/device_query.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "genesis/core/status.h"
#include "genesis/cuda/device_guard.h"
#include "genesis/cuda/internal/check.h"
#include "genesis/cuda/internal/common.h"

namespace genesis::cuda {
namespace {

struct DeviceCountResult {
  int count = 0;
  std::string no_device_reason;  // Empty iff count > 0.
};

DeviceCountResult QueryDeviceCount() {
  DeviceCountResult result;
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    // E.g. cudaErrorInsufficientDriver without a driver, cudaErrorNoDevice when
    // CUDA_VISIBLE_DEVICES hides everything: both mean "no device" to us.
    IgnoreCudaError(err);
    result.no_device_reason =
        absl::StrCat(cudaGetErrorString(err), " (", cudaGetErrorName(err),
                     " from cudaGetDeviceCount)", internal::VisibleDevicesNote());
    return result;
  }
  result.count = count;
  if (count <= 0) {
    result.count = 0;
    result.no_device_reason = absl::StrCat("cudaGetDeviceCount reported 0 devices",
                                           internal::VisibleDevicesNote());
  }
  return result;
}

const DeviceCountResult& CachedDeviceCount() {
  // Initialized once, thread-safely (a function-local static); never destroyed, so it
  // stays usable from other static destructors.
  static const DeviceCountResult* const result =
      new DeviceCountResult(QueryDeviceCount());
  return *result;
}

// One integer attribute of `device`; the message names the attribute.
absl::StatusOr<int> Attribute(int device, cudaDeviceAttr attr, const char* name) {
  int value = 0;
  const cudaError_t err = cudaDeviceGetAttribute(&value, attr, device);
  if (err != cudaSuccess) {
    return CudaStatus(err, absl::StrCat("cudaDeviceGetAttribute(", name, ")"), device);
  }
  return value;
}

using NcclGetVersionFn = int (*)(int*);  // ncclResult_t ncclGetVersion(int*).

void ProbeNccl(Versions& versions) {
  constexpr const char* kLibrary = "libnccl.so.2";
  // Kept loaded for the life of the process (NCCL is not meant to be unloaded, and a
  // later user of NCCL in this process shares it).
  void* handle = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = dlerror();
    versions.nccl_error = error != nullptr ? error : absl::StrCat(kLibrary, ": not found");
    return;
  }
  auto get_version = reinterpret_cast<NcclGetVersionFn>(dlsym(handle, "ncclGetVersion"));
  if (get_version == nullptr) {
    const char* error = dlerror();
    versions.nccl_error = absl::StrCat(kLibrary, " has no ncclGetVersion",
                                       error != nullptr ? absl::StrCat(": ", error) : "");
    return;
  }
  int version = 0;
  const int result = get_version(&version);
  if (result != 0) {  // ncclSuccess == 0.
    versions.nccl_error = absl::StrCat("ncclGetVersion failed with ncclResult_t ", result);
    return;
  }
  versions.nccl = version;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(get_version), &info) != 0 && info.dli_fname != nullptr) {
    versions.nccl_library = info.dli_fname;
  }
}

Versions QueryVersions() {
  Versions versions;
  int runtime = 0;
  const cudaError_t runtime_err = cudaRuntimeGetVersion(&runtime);
  if (runtime_err == cudaSuccess) {
    versions.runtime = runtime;
  } else {
    IgnoreCudaError(runtime_err);
  }
  int driver = 0;  // cudaDriverGetVersion reports 0 when there is no driver.
  const cudaError_t driver_err = cudaDriverGetVersion(&driver);
  if (driver_err == cudaSuccess) {
    versions.driver = driver;
  } else {
    IgnoreCudaError(driver_err);
  }
  ProbeNccl(versions);
  return versions;
}

}  // namespace

bool BuiltWithCuda() { return true; }

int DeviceCount() { return CachedDeviceCount().count; }

std::string NoDeviceReason() { return CachedDeviceCount().no_device_reason; }

absl::Status CheckDeviceIndex(int device) {
  const DeviceCountResult& count = CachedDeviceCount();
  return internal::DeviceIndexStatus(device, count.count, count.no_device_reason);
}

absl::StatusOr<DeviceProperties> GetDeviceProperties(int device) {
  GENESIS_RETURN_IF_ERROR(CheckDeviceIndex(device));
  cudaDeviceProp prop;
  std::memset(&prop, 0, sizeof(prop));
  GENESIS_CUDA_RETURN_IF_ERROR_ON(device, cudaGetDeviceProperties(&prop, device));

  DeviceProperties p;
  p.index = device;
  p.name = std::string(prop.name, strnlen(prop.name, sizeof(prop.name)));
  p.total_memory = prop.totalGlobalMem;
  p.uuid = internal::FormatUuid(prop.uuid.bytes);

  // Scalars through cudaDeviceGetAttribute: stable across CUDA versions (CUDA 13 removed
  // several cudaDeviceProp fields, e.g. clockRate).
#define GENESIS_CUDA_ATTRIBUTE_(lhs, attr) \
  GENESIS_ASSIGN_OR_RETURN(lhs, Attribute(device, attr, #attr))
  GENESIS_CUDA_ATTRIBUTE_(p.cc_major, cudaDevAttrComputeCapabilityMajor);
  GENESIS_CUDA_ATTRIBUTE_(p.cc_minor, cudaDevAttrComputeCapabilityMinor);
  GENESIS_CUDA_ATTRIBUTE_(p.multiprocessors, cudaDevAttrMultiProcessorCount);
  GENESIS_CUDA_ATTRIBUTE_(p.async_copy_engines, cudaDevAttrAsyncEngineCount);
  GENESIS_CUDA_ATTRIBUTE_(p.pci_domain, cudaDevAttrPciDomainId);
  GENESIS_CUDA_ATTRIBUTE_(p.pci_bus, cudaDevAttrPciBusId);
  GENESIS_CUDA_ATTRIBUTE_(p.pci_device, cudaDevAttrPciDeviceId);
  GENESIS_CUDA_ATTRIBUTE_(const int unified, cudaDevAttrUnifiedAddressing);
  GENESIS_CUDA_ATTRIBUTE_(const int integrated, cudaDevAttrIntegrated);
  GENESIS_CUDA_ATTRIBUTE_(const int managed, cudaDevAttrManagedMemory);
  GENESIS_CUDA_ATTRIBUTE_(const int concurrent_managed, cudaDevAttrConcurrentManagedAccess);
  GENESIS_CUDA_ATTRIBUTE_(const int pools, cudaDevAttrMemoryPoolsSupported);
  GENESIS_CUDA_ATTRIBUTE_(const int ecc, cudaDevAttrEccEnabled);
  GENESIS_CUDA_ATTRIBUTE_(p.l2_cache_bytes, cudaDevAttrL2CacheSize);
  GENESIS_CUDA_ATTRIBUTE_(p.clock_khz, cudaDevAttrClockRate);
  GENESIS_CUDA_ATTRIBUTE_(p.memory_clock_khz, cudaDevAttrMemoryClockRate);
  GENESIS_CUDA_ATTRIBUTE_(p.memory_bus_width_bits, cudaDevAttrGlobalMemoryBusWidth);
  GENESIS_CUDA_ATTRIBUTE_(p.max_threads_per_block, cudaDevAttrMaxThreadsPerBlock);
  GENESIS_CUDA_ATTRIBUTE_(p.warp_size, cudaDevAttrWarpSize);
  GENESIS_CUDA_ATTRIBUTE_(const int smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin);
#undef GENESIS_CUDA_ATTRIBUTE_

  p.unified_addressing = unified != 0;
  p.integrated = integrated != 0;
  p.managed_memory = managed != 0;
  p.concurrent_managed_access = concurrent_managed != 0;
  p.memory_pools = pools != 0;
  p.ecc_enabled = ecc != 0;
  p.max_shared_memory_per_block_optin = static_cast<size_t>(smem_optin);
  p.pci_bus_id = internal::FormatPciBusId(p.pci_domain, p.pci_bus, p.pci_device);
  return p;
}

absl::StatusOr<MemoryInfo> GetMemoryInfo(int device) {
  GENESIS_ASSIGN_OR_RETURN(DeviceGuard guard, DeviceGuard::Create(device));
  MemoryInfo info;
  GENESIS_CUDA_RETURN_IF_ERROR_ON(device, cudaMemGetInfo(&info.free_bytes, &info.total_bytes));
  return info;
}

absl::StatusOr<std::vector<std::vector<bool>>> PeerAccessMatrix() {
  const int n = DeviceCount();
  std::vector<std::vector<bool>> matrix(n, std::vector<bool>(n, false));
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (i == j) {
        matrix[i][j] = true;
        continue;
      }
      int can_access = 0;
      const cudaError_t err = cudaDeviceCanAccessPeer(&can_access, i, j);
      if (err != cudaSuccess) {
        return CudaStatus(err, absl::StrCat("cudaDeviceCanAccessPeer(cuda:", i, " -> cuda:", j, ")"), i);
      }
      matrix[i][j] = can_access != 0;
    }
  }
  return matrix;
}

Versions GetVersions() {
  static const Versions* const versions = new Versions(QueryVersions());
  return *versions;
}

}  // namespace genesis::cuda
