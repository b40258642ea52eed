// Which CUDA devices this process can use, what they are, and which CUDA, driver and
// NCCL versions are present.
//
// These functions answer the same questions in both builds of genesis. In a build with
// CUDA they ask the CUDA runtime; a machine without a GPU or without the NVIDIA driver
// simply has zero devices (never an abort). In the CPU-only build (no CUDA toolkit) there
// are always zero devices, and every query about a particular CUDA device returns
// FailedPrecondition("genesis was built without CUDA support (CPU-only build)...").
//
// Device indices are CUDA runtime ordinals, i.e. positions among the devices left
// visible by CUDA_VISIBLE_DEVICES; "cuda:N" (genesis::Device) names ordinal N.
// All functions are thread-safe.

#ifndef GENESIS_CUDA_DEVICE_QUERY_H_
#define GENESIS_CUDA_DEVICE_QUERY_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "genesis/core/device.h"

namespace genesis::cuda {

// True iff this binary was built with CUDA support (a CUDA toolkit was used), whether or
// not the machine it runs on has a GPU.
bool BuiltWithCuda();

// The number of CUDA devices visible to this process. Never fails: 0 when the binary was
// built without CUDA, when there is no NVIDIA driver or it is too old, or when
// CUDA_VISIBLE_DEVICES hides every device (NoDeviceReason() then says which). The answer
// is computed once per process and cached.
int DeviceCount();

// Why DeviceCount() is 0, for messages: the CUDA error cudaGetDeviceCount reported (name
// and text, e.g. "CUDA driver version is insufficient for CUDA runtime version
// (cudaErrorInsufficientDriver from cudaGetDeviceCount)"), or that genesis was built
// without CUDA. Mentions CUDA_VISIBLE_DEVICES when it is set. Empty when
// DeviceCount() > 0.
std::string NoDeviceReason();

// OK iff `device` is usable here: the CPU always is; cuda:N is iff 0 <= N <
// DeviceCount(). Otherwise OutOfRange, naming the device and how many are visible
// ("device 'cuda:99' does not exist: 2 CUDA devices visible (cuda:0 to cuda:1)", or
// "...: no CUDA device is visible (reason: <NoDeviceReason()>)"). In the CPU-only build
// every CUDA device gives FailedPrecondition instead.
absl::Status CheckDeviceExists(const Device& device);

// CheckDeviceExists(Device::Cuda(device)), for APIs that take a CUDA ordinal.
absl::Status CheckDeviceIndex(int device);

// Parses `spec` with Device::Parse ("cpu", "cuda", "cuda:1", ...) and checks that the
// device exists here. Returns Device::Parse's error for bad syntax (unchanged), else the
// error of CheckDeviceExists.
absl::StatusOr<Device> ResolveDevice(std::string_view spec);

// Static description of one CUDA device.
struct DeviceProperties {
  int index = -1;        // CUDA ordinal (cuda:<index>).
  std::string name;      // E.g. "NVIDIA H200".
  int cc_major = 0;      // Compute capability, e.g. 9.0 for Hopper.
  int cc_minor = 0;
  size_t total_memory = 0;  // Bytes of device memory.
  int multiprocessors = 0;
  int async_copy_engines = 0;  // Copy engines (concurrent copy directions).
  int pci_domain = 0;
  int pci_bus = 0;
  int pci_device = 0;
  std::string pci_bus_id;  // "dddd:bb:dd.0", as nvidia-smi prints it (lower-case hex).
  std::string uuid;        // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi.
  bool unified_addressing = false;  // Shares one virtual address space with the host.
  bool integrated = false;          // Integrated with host memory (e.g. Jetson).
  bool managed_memory = false;      // Supports cudaMallocManaged.
  bool concurrent_managed_access = false;
  bool memory_pools = false;  // Supports cudaMallocAsync / memory pools.
  bool ecc_enabled = false;
  int l2_cache_bytes = 0;
  int clock_khz = 0;         // Peak SM clock.
  int memory_clock_khz = 0;  // Peak memory clock.
  int memory_bus_width_bits = 0;
  int max_threads_per_block = 0;
  int warp_size = 0;
  size_t max_shared_memory_per_block_optin = 0;  // Bytes, with opt-in.
};

// The properties of CUDA device `device`. OutOfRange if it does not exist; the CUDA
// error (as a status naming the device) if the runtime fails to answer. Leaves the
// calling thread's current device unchanged.
absl::StatusOr<DeviceProperties> GetDeviceProperties(int device);

// Free and total device memory of one device, in bytes.
struct MemoryInfo {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
};

// The current free/total memory of `device` (cudaMemGetInfo). Makes `device` current
// for the call (creating its primary context if needed, which itself takes some memory)
// and restores the calling thread's previous device. OutOfRange if the device does not
// exist.
absl::StatusOr<MemoryInfo> GetMemoryInfo(int device);

// matrix[i][j] is true iff device i can access device j's memory directly
// (cudaDeviceCanAccessPeer; peer access still has to be enabled to be used). Square, of
// size DeviceCount(), with a true diagonal; empty when there is no device.
// FailedPrecondition in the CPU-only build.
absl::StatusOr<std::vector<std::vector<bool>>> PeerAccessMatrix();

// Versions of the CUDA software present. Codes are as the libraries report them.
struct Versions {
  int runtime = 0;  // CUDA runtime linked in (cudaRuntimeGetVersion), e.g. 13000; 0 if none.
  int driver = 0;   // CUDA version the driver supports (cudaDriverGetVersion); 0 if none.
  int nccl = 0;     // NCCL found at run time (ncclGetVersion), e.g. 22809; 0 if none.
  std::string nccl_error;  // Why nccl is 0 (e.g. the dlopen error); empty otherwise.
  // The file NCCL was loaded from (whichever libnccl.so.2 the dynamic loader found:
  // LD_LIBRARY_PATH chooses it); empty when there is none.
  std::string nccl_library;
};

// The versions above. Never fails; computed once per process. NCCL is looked up with
// dlopen("libnccl.so.2") at the first call, so binaries start without NCCL; a library
// found is kept loaded. In the CPU-only build all are 0 and nccl_error says why.
Versions GetVersions();

// "13.0" for the CUDA version code 13000 (major * 1000 + minor * 10); "none" for codes
// <= 0.
std::string FormatCudaVersion(int version);

// "2.28.9" for the NCCL version code 22809; codes >= 10000 are major * 10000 + minor *
// 100 + patch, older ones (e.g. 2708 -> "2.7.8") major * 1000 + minor * 100 + patch;
// "none" for codes <= 0.
std::string FormatNcclVersion(int version);

// One line describing `versions`, e.g.
// "CUDA runtime 13.0, driver 13.0, NCCL 2.28.9" or
// "CUDA runtime 13.0, driver none, NCCL none (libnccl.so.2: cannot open ...)".
std::string FormatVersions(const Versions& versions);

}  // namespace genesis::cuda

#endif  // GENESIS_CUDA_DEVICE_QUERY_H_
