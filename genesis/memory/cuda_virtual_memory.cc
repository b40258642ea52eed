// CudaVirtualMemory (CUDA builds only).

#include "genesis/memory/cuda_virtual_memory.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <string>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "genesis/core/status.h"
#include "genesis/cuda/device_guard.h"
#include "genesis/cuda/device_query.h"
#include "genesis/cuda/internal/check.h"
#include "genesis/cuda/internal/driver.h"

namespace genesis::memory {
namespace {

using Driver = cuda::VirtualMemoryApi;

absl::StatusOr<const Driver*> LoadDriver() { return cuda::LoadVirtualMemoryApi(); }

// Only called once LoadDriver succeeded.
const Driver& Api() { return **LoadDriver(); }

using cuda::DriverStatus;

CUmemAllocationProp ChunkProperties(int device, bool exportable) {
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  prop.requestedHandleTypes =
      exportable ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
  return prop;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CudaVirtualMemory>> CudaVirtualMemory::Create(int device) {
  GENESIS_RETURN_IF_ERROR(cuda::CheckDeviceIndex(device));
  GENESIS_ASSIGN_OR_RETURN(const Driver* d, LoadDriver());
  // The runtime creates the device's primary context, which the driver calls need.
  GENESIS_ASSIGN_OR_RETURN(cuda::DeviceGuard guard, cuda::DeviceGuard::Create(device));
  GENESIS_RETURN_IF_ERROR(cuda::CudaStatus(cudaFree(nullptr), "cudaFree(nullptr)", device));
  CUdevice dev = 0;
  GENESIS_RETURN_IF_ERROR(DriverStatus(d->device_get(&dev, device), "cuDeviceGet", device));
  int supported = 0;
  GENESIS_RETURN_IF_ERROR(DriverStatus(
      d->device_get_attribute(&supported,
                              CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev),
      "cuDeviceGetAttribute", device));
  if (supported == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cuda:", device, " does not support virtual memory management"));
  }
  int fd_handles = 0;
  GENESIS_RETURN_IF_ERROR(DriverStatus(
      d->device_get_attribute(
          &fd_handles, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, dev),
      "cuDeviceGetAttribute", device));
  const bool exportable = fd_handles != 0;
  const CUmemAllocationProp prop = ChunkProperties(device, exportable);
  size_t granularity = 0;
  GENESIS_RETURN_IF_ERROR(DriverStatus(
      d->get_granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
      "cuMemGetAllocationGranularity", device));
  auto vm = std::unique_ptr<CudaVirtualMemory>(
      new CudaVirtualMemory(device, granularity, exportable));
  // Peers enabled before this object existed get access from its first map on.
  const std::vector<std::pair<int, int>> enabled = cuda::AddPeerAccessListener(vm.get());
  {
    std::lock_guard<std::mutex> lock(vm->mu_);
    for (const auto& [from, to] : enabled) {
      if (to == device && from != device && !absl::c_linear_search(vm->accessors_, from)) {
        vm->accessors_.push_back(from);
      }
    }
  }
  return vm;
}

CudaVirtualMemory::CudaVirtualMemory(int device, size_t granularity, bool exportable)
    : device_(device),
      granularity_(granularity),
      exportable_(exportable),
      accessors_{device},
      deferred_([this](const std::vector<Piece>& pieces) { return SyncAndRelease(pieces); }) {}

std::vector<int> CudaVirtualMemory::accessors() const {
  std::lock_guard<std::mutex> lock(mu_);
  return accessors_;
}

absl::Status CudaVirtualMemory::GrantPeerAccess(int from, int to) {
  if (to != device_ || from == device_) return absl::OkStatus();
  GENESIS_ASSIGN_OR_RETURN(cuda::DeviceGuard guard, cuda::DeviceGuard::Create(device_));
  std::lock_guard<std::mutex> lock(mu_);
  if (absl::c_linear_search(accessors_, from)) return absl::OkStatus();
  CUmemAccessDesc access = {};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = from;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  // One call per run of adjacent pieces of one reservation.
  uintptr_t run = 0;
  uintptr_t run_end = 0;
  auto open = [&]() -> absl::Status {
    if (run_end == run) return absl::OkStatus();
    return DriverStatus(Api().set_access(static_cast<CUdeviceptr>(run), run_end - run,
                                         &access, 1),
                        absl::StrCat("cuMemSetAccess for cuda:", from), device_);
  };
  for (const auto& [start, piece] : pieces_.pieces()) {
    if (start != run_end || reservations_.contains(start)) {
      GENESIS_RETURN_IF_ERROR(open());
      run = start;
    }
    run_end = start + piece.size;
  }
  GENESIS_RETURN_IF_ERROR(open());
  accessors_.push_back(from);
  return absl::OkStatus();
}

CudaVirtualMemory::~CudaVirtualMemory() {
  cuda::RemovePeerAccessListener(this);
  deferred_.WaitAll();
  std::vector<Piece> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [start, piece] : pieces_.pieces()) all.push_back(piece);
  }
  if (!all.empty()) {
    cuda::internal::BestEffortDeviceSwitch on_device(device_);
    cuda::IgnoreCudaError(cudaDeviceSynchronize());
    listeners_.Unmapping(all);
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!all.empty()) ReleasePiecesLocked(all);
  for (const auto& [base, bytes] : reservations_) {
    (void)Api().address_free(static_cast<CUdeviceptr>(base), bytes);
  }
}

absl::StatusOr<void*> CudaVirtualMemory::Reserve(size_t bytes) {
  if (bytes == 0 || bytes % granularity_ != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CudaVirtualMemory::Reserve: ", bytes, " bytes is not a positive multiple of ",
        granularity_));
  }
  CUdeviceptr base = 0;
  const CUresult r = Api().address_reserve(&base, bytes, granularity_, 0, 0);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "cuMemAddressReserve(", bytes, " bytes) on cuda:", device_, ": no address space"));
  }
  GENESIS_RETURN_IF_ERROR(
      DriverStatus(r, absl::StrCat("cuMemAddressReserve(", bytes, " bytes)"), device_));
  std::lock_guard<std::mutex> lock(mu_);
  reservations_[static_cast<uintptr_t>(base)] = bytes;
  return reinterpret_cast<void*>(base);
}

void CudaVirtualMemory::Unreserve(void* base, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = reservations_.find(reinterpret_cast<uintptr_t>(base));
  if (it == reservations_.end() || it->second != bytes) return;
  deferred_.WaitForRange(reinterpret_cast<uintptr_t>(base), bytes);
  (void)Api().address_free(reinterpret_cast<CUdeviceptr>(base), bytes);
  reservations_.erase(it);
}

void CudaVirtualMemory::ReleasePiecesLocked(const std::vector<Piece>& pieces) {
  for (const Piece& piece : pieces) {
    (void)Api().unmap(static_cast<CUdeviceptr>(piece.start), piece.size);
    (void)Api().release(static_cast<CUmemGenericAllocationHandle>(piece.handle));
    pieces_.Erase(piece.start);
  }
}

absl::Status CudaVirtualMemory::MapPieces(void* ptr, size_t bytes, const PieceCut& cut) {
  const auto start = reinterpret_cast<uintptr_t>(ptr);
  if (bytes == 0 || start % granularity_ != 0 || bytes % granularity_ != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "CudaVirtualMemory::Map(%p, %d): not chunk-aligned (chunks of %d bytes)", ptr,
        bytes, granularity_));
  }
  GENESIS_RETURN_IF_ERROR(CheckMaxPiece(cut.max_piece, granularity_, "CudaVirtualMemory::Map"));
  GENESIS_ASSIGN_OR_RETURN(cuda::DeviceGuard guard, cuda::DeviceGuard::Create(device_));
  std::vector<Piece> mapped;
  GENESIS_RETURN_IF_ERROR(MapAndGiveAccess(start, bytes, cut, mapped));
  listeners_.Mapped(mapped);
  return absl::OkStatus();
}

absl::Status CudaVirtualMemory::MapAndGiveAccess(uintptr_t start, size_t bytes,
                                                 const PieceCut& cut,
                                                 std::vector<Piece>& mapped) {
  void* const ptr = reinterpret_cast<void*>(start);
  const Driver& d = Api();
  const CUmemAllocationProp prop = ChunkProperties(device_, exportable_);
  std::lock_guard<std::mutex> lock(mu_);
  // Pieces unmapped here before may still be on their way back.
  deferred_.WaitForRange(start, bytes);
  if (pieces_.Overlaps(start, bytes)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "CudaVirtualMemory::Map(%p, %d): part of the range is already mapped", ptr, bytes));
  }
  uintptr_t origin = start;
  for (const auto& [base, size] : reservations_) {
    if (start >= base && start - base < size) origin = base;
  }
  absl::Status status;
  for (Piece piece : SplitIntoPieces(origin, start, bytes, granularity_, cut)) {
    CUmemGenericAllocationHandle handle = 0;
    CUresult created = d.create(&handle, piece.size, &prop, 0);
    if (created == CUDA_ERROR_OUT_OF_MEMORY && deferred_.pending_bytes() > 0) {
      // Memory unmapped before may be all that is missing: wait for it.
      deferred_.WaitAll();
      created = d.create(&handle, piece.size, &prop, 0);
    }
    status = DriverStatus(created, absl::StrCat("cuMemCreate(", piece.size, " bytes)"),
                          device_);
    if (!status.ok()) break;
    status = DriverStatus(d.map(static_cast<CUdeviceptr>(piece.start), piece.size, 0, handle, 0),
                          "cuMemMap", device_);
    if (!status.ok()) {
      (void)d.release(handle);
      break;
    }
    piece.handle = static_cast<uint64_t>(handle);
    pieces_.Insert(piece);
    mapped.push_back(piece);
  }
  if (status.ok()) {
    std::vector<CUmemAccessDesc> access(accessors_.size());
    for (size_t i = 0; i < accessors_.size(); ++i) {
      access[i].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      access[i].location.id = accessors_[i];
      access[i].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    }
    status = DriverStatus(
        d.set_access(static_cast<CUdeviceptr>(start), bytes, access.data(), access.size()),
        "cuMemSetAccess", device_);
  }
  if (!status.ok()) {
    ReleasePiecesLocked(mapped);
    mapped.clear();
  }
  return status;
}

absl::Status CudaVirtualMemory::Unmap(void* ptr, size_t bytes) {
  const auto start = reinterpret_cast<uintptr_t>(ptr);
  if (bytes == 0 || start % granularity_ != 0 || bytes % granularity_ != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "CudaVirtualMemory::Unmap(%p, %d): not chunk-aligned", ptr, bytes));
  }
  std::lock_guard<std::mutex> lock(mu_);
  GENESIS_ASSIGN_OR_RETURN(std::vector<Piece> tiling,
                           pieces_.Tiling(start, bytes, "CudaVirtualMemory::Unmap"));
  for (const Piece& piece : tiling) pieces_.Erase(piece.start);
  // Under mu_, so that a map of the same range sees the pieces pending.
  deferred_.Post(std::move(tiling));
  return absl::OkStatus();
}

absl::Status CudaVirtualMemory::SyncAndRelease(const std::vector<Piece>& pieces) {
  absl::Status status;
  {
    cuda::internal::BestEffortDeviceSwitch on_device(device_);
    status = cuda::CudaStatus(cudaDeviceSynchronize(),
                              "cudaDeviceSynchronize before unmapping", device_);
    // Even when the device failed: its work has ended, and the memory must go back.
    listeners_.Unmapping(pieces);
  }
  const Driver& d = Api();
  for (const Piece& piece : pieces) {
    (void)d.unmap(static_cast<CUdeviceptr>(piece.start), piece.size);
    (void)d.release(static_cast<CUmemGenericAllocationHandle>(piece.handle));
  }
  return status;
}

absl::Status CudaVirtualMemory::FinishUnmaps() {
  deferred_.WaitAll();
  return deferred_.TakeError();
}

std::optional<Piece> CudaVirtualMemory::PieceContaining(const void* p) const {
  std::lock_guard<std::mutex> lock(mu_);
  return pieces_.Containing(reinterpret_cast<uintptr_t>(p));
}

std::pair<uintptr_t, uintptr_t> CudaVirtualMemory::PieceAt(uintptr_t p) const {
  std::lock_guard<std::mutex> lock(mu_);
  return pieces_.BoundsAt(p, granularity_);
}

}  // namespace genesis::memory
