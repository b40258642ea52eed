// CUDA implementation of cuda_ipc.h.
#include "genesis/storage/cuda_ipc.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "genesis/core/status.h"
#include "genesis/cuda/device_guard.h"
#include "genesis/cuda/device_query.h"
#include "genesis/cuda/internal/check.h"
#include "genesis/cuda/internal/driver.h"
#include "genesis/cuda/sanitizer_marks.h"
#include "genesis/storage/internal/ipc_wire.h"

namespace genesis::storage {
namespace {

using cuda::DriverStatus;
using ipc_internal::Header;
using ipc_internal::Kind;

using Driver = cuda::VirtualMemoryApi;

absl::StatusOr<const Driver*> LoadDriver() { return cuda::LoadVirtualMemoryApi(); }

// An allocation of another process opened with cudaIpcOpenMemHandle; closed when the
// last storage over it goes.
struct OpenedAllocation {
  int device = 0;
  void* base = nullptr;
  ~OpenedAllocation() {
    cuda::internal::BestEffortDeviceSwitch use(device);
    cuda::IgnoreCudaError(cudaDeviceSynchronize());
    cuda::IgnoreCudaError(cudaIpcCloseMemHandle(base));
  }
};

// CUDA opens an allocation once per process: later storages of it share the mapping.
absl::StatusOr<std::shared_ptr<OpenedAllocation>> OpenLegacy(const Header& h, int device) {
  static std::mutex mu;
  static auto* opened =
      new absl::flat_hash_map<std::string, std::weak_ptr<OpenedAllocation>>();
  const std::string key(reinterpret_cast<const char*>(h.legacy_handle),
                        sizeof(h.legacy_handle));
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = opened->find(key); it != opened->end()) {
    if (std::shared_ptr<OpenedAllocation> live = it->second.lock()) return live;
  }
  cudaIpcMemHandle_t handle;
  std::memcpy(&handle, h.legacy_handle, sizeof(handle));
  void* base = nullptr;
  GENESIS_CUDA_RETURN_IF_ERROR_ON(
      device, cudaIpcOpenMemHandle(&base, handle, cudaIpcMemLazyEnablePeerAccess));
  auto allocation = std::make_shared<OpenedAllocation>();
  allocation->device = device;
  allocation->base = base;
  absl::erase_if(*opened, [](const auto& entry) { return entry.second.expired(); });
  (*opened)[key] = allocation;
  return allocation;
}

// Chunks of another process mapped side by side into an address range of ours.
struct MappedChunks {
  int device = 0;
  CUdeviceptr base = 0;
  size_t reserved = 0;
  size_t mapped = 0;  // Bytes mapped from base.
  ~MappedChunks() {
    const Driver& d = **LoadDriver();
    cuda::internal::BestEffortDeviceSwitch use(device);
    cuda::IgnoreCudaError(cudaDeviceSynchronize());
    if (mapped > 0) (void)d.unmap(base, mapped);
    if (reserved > 0) (void)d.address_free(base, reserved);
  }
};

absl::StatusOr<std::shared_ptr<MappedChunks>> MapChunks(const Driver& d,
                                                        ipc_internal::Message& m,
                                                        int device) {
  auto chunks = std::make_shared<MappedChunks>();
  chunks->device = device;
  const size_t bytes = m.header.range_bytes;
  GENESIS_RETURN_IF_ERROR(DriverStatus(d.address_reserve(&chunks->base, bytes, 0, 0, 0),
                                       absl::StrCat("cuMemAddressReserve(", bytes, ")"),
                                       device));
  chunks->reserved = bytes;
  for (size_t i = 0; i < m.chunk_bytes.size(); ++i) {
    CUmemGenericAllocationHandle handle;
    GENESIS_RETURN_IF_ERROR(DriverStatus(
        d.import_handle(&handle,
                        reinterpret_cast<void*>(static_cast<uintptr_t>(m.fds[i].get())),
                        CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
        "cuMemImportFromShareableHandle", device));
    const CUresult r = d.map(chunks->base + chunks->mapped, m.chunk_bytes[i], 0, handle, 0);
    (void)d.release(handle);  // The mapping keeps the memory.
    GENESIS_RETURN_IF_ERROR(DriverStatus(r, "cuMemMap", device));
    chunks->mapped += m.chunk_bytes[i];
  }
  CUmemAccessDesc access = {};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  GENESIS_RETURN_IF_ERROR(
      DriverStatus(d.set_access(chunks->base, bytes, &access, 1), "cuMemSetAccess", device));
  return chunks;
}

// The ordinal of the device with `uuid`, trying the sender's ordinal first.
absl::StatusOr<int> DeviceWithUuid(const char* uuid, int hint) {
  const int count = cuda::DeviceCount();
  for (int i = -1; i < count; ++i) {
    const int device = i < 0 ? hint : i;
    if (device < 0 || device >= count) continue;
    GENESIS_ASSIGN_OR_RETURN(const cuda::DeviceProperties props,
                             cuda::GetDeviceProperties(device));
    if (props.uuid == uuid) return device;
  }
  return absl::NotFoundError(absl::StrCat("received a CUDA storage of device ", uuid,
                                          " (cuda:", hint, " of the sender), which is not "
                                          "visible here (see CUDA_VISIBLE_DEVICES)"));
}

}  // namespace

absl::Status SendCudaStorage(int socket, const Storage& storage) {
  if (!storage.defined() || !storage.device().is_cuda()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SendCudaStorage: ", storage.ToString(), " is not a CUDA storage"));
  }
  const int device = storage.device().index();
  GENESIS_ASSIGN_OR_RETURN(const Driver* d, LoadDriver());
  GENESIS_RETURN_IF_ERROR(storage.Synchronize());
  Header h;
  h.device = device;
  GENESIS_ASSIGN_OR_RETURN(const cuda::DeviceProperties props,
                           cuda::GetDeviceProperties(device));
  std::strncpy(h.uuid, props.uuid.c_str(), sizeof(h.uuid) - 1);
  h.dtype = static_cast<uint32_t>(storage.dtype());
  h.rank = storage.rank();
  for (int i = 0; i < h.rank; ++i) {
    h.shape[i] = storage.shape()[i];
    h.strides[i] = storage.strides()[i];
  }
  h.offset = storage.offset();
  h.memory_bytes = storage.size_bytes();
  if (h.memory_bytes == 0) return ipc_internal::SendMessage(socket, h, {}, {});

  GENESIS_ASSIGN_OR_RETURN(cuda::DeviceGuard guard, cuda::DeviceGuard::Create(device));
  const auto ptr = reinterpret_cast<CUdeviceptr>(storage.base_ptr());
  int legacy = 0;
  GENESIS_RETURN_IF_ERROR(DriverStatus(
      d->pointer_get_attribute(&legacy, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, ptr),
      "cuPointerGetAttribute(IS_LEGACY_CUDA_IPC_CAPABLE)", device));
  if (legacy != 0) {
    CUdeviceptr base = 0;
    size_t bytes = 0;
    GENESIS_RETURN_IF_ERROR(
        DriverStatus(d->get_address_range(&base, &bytes, ptr), "cuMemGetAddressRange", device));
    cudaIpcMemHandle_t handle;
    GENESIS_CUDA_RETURN_IF_ERROR_ON(device,
                                    cudaIpcGetMemHandle(&handle, reinterpret_cast<void*>(base)));
    h.kind = Kind::kLegacy;
    std::memcpy(h.legacy_handle, &handle, sizeof(handle));
    h.range_offset = ptr - base;
    h.range_bytes = bytes;
    return ipc_internal::SendMessage(socket, h, {}, {});
  }
  // Expandable segments: one descriptor for each chunk the memory touches.
  std::vector<uint64_t> sizes;
  std::vector<internal::ScopedFd> fds;
  std::vector<int> raw_fds;
  CUdeviceptr first = 0;
  for (CUdeviceptr p = ptr; p < ptr + h.memory_bytes;) {
    CUdeviceptr chunk = 0;
    size_t bytes = 0;
    GENESIS_RETURN_IF_ERROR(DriverStatus(d->get_address_range(&chunk, &bytes, p),
                                         "cuMemGetAddressRange", device));
    CUmemGenericAllocationHandle handle;
    const CUresult retained =
        d->retain_allocation_handle(&handle, reinterpret_cast<void*>(chunk));
    if (retained != CUDA_SUCCESS) {
      return absl::FailedPreconditionError(absl::StrCat(
          "SendCudaStorage: ", storage.ToString(), " is neither cudaMalloc memory nor "
          "cuMemCreate memory (", DriverStatus(retained, "cuMemRetainAllocationHandle").message(),
          ")"));
    }
    int fd = -1;
    const CUresult exported =
        d->export_handle(&fd, handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    (void)d->release(handle);
    GENESIS_RETURN_IF_ERROR(DriverStatus(
        exported, "cuMemExportToShareableHandle (chunks need a POSIX descriptor handle type)",
        device));
    fds.emplace_back(fd);
    raw_fds.push_back(fd);
    sizes.push_back(bytes);
    if (first == 0) first = chunk;
    p = chunk + bytes;
  }
  h.kind = Kind::kChunks;
  h.num_chunks = static_cast<uint32_t>(sizes.size());
  h.range_offset = ptr - first;
  for (uint64_t s : sizes) h.range_bytes += s;
  return ipc_internal::SendMessage(socket, h, sizes, raw_fds);
}

absl::StatusOr<Storage> ReceiveCudaStorage(int socket, std::source_location where) {
  GENESIS_ASSIGN_OR_RETURN(ipc_internal::Message m, ipc_internal::ReceiveMessage(socket));
  const Header& h = m.header;
  GENESIS_ASSIGN_OR_RETURN(
      const Layout layout,
      Layout::Strided(absl::MakeConstSpan(h.shape, h.rank),
                      absl::MakeConstSpan(h.strides, h.rank), h.offset));
  const auto dtype = static_cast<DType>(h.dtype);
  GENESIS_ASSIGN_OR_RETURN(const int device, DeviceWithUuid(h.uuid, h.device));
  if (h.kind == Kind::kEmpty) {
    return Storage::FromExternal(nullptr, 0, layout, dtype, Device::Cuda(device), nullptr,
                                 {}, where);
  }
  GENESIS_ASSIGN_OR_RETURN(const Driver* d, LoadDriver());
  GENESIS_ASSIGN_OR_RETURN(cuda::DeviceGuard guard, cuda::DeviceGuard::Create(device));
  if (h.kind == Kind::kLegacy) {
    GENESIS_ASSIGN_OR_RETURN(std::shared_ptr<OpenedAllocation> opened, OpenLegacy(h, device));
    void* base = static_cast<char*>(opened->base) + h.range_offset;
    // The sender wrote these bytes, where this process's compute-sanitizer cannot see.
    cuda::MarkInitialized(base, h.memory_bytes);
    return Storage::FromExternal(base, h.memory_bytes, layout, dtype, Device::Cuda(device),
                                 [opened](void*) {}, {}, where);
  }
  GENESIS_ASSIGN_OR_RETURN(std::shared_ptr<MappedChunks> chunks, MapChunks(*d, m, device));
  void* base = reinterpret_cast<void*>(chunks->base + h.range_offset);
  return Storage::FromExternal(base, h.memory_bytes, layout, dtype, Device::Cuda(device),
                               [chunks](void*) {}, {}, where);
}

}  // namespace genesis::storage
