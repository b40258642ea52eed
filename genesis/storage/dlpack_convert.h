// Conversion between DLPack tensors (dlpack/dlpack.h, DLPack 0.6 ABI: the
// legacy DLManagedTensor) and genesis's own description of a view: a data
// pointer, a Layout, a DType and a Device. This layer knows nothing about who
// owns the memory; it only translates descriptions and manages the
// DLManagedTensor's own allocations.
//
// How Storage uses it:
//   * Storage::ToDLPack wraps ExportDLPack: it passes the storage's base
//     pointer and view, and a `release` that drops one reference to the
//     storage's buffer. The consumer (PyTorch, CuPy, JAX, ...) calls the
//     DLManagedTensor's deleter when it is done; that runs `release`, so the
//     buffer lives exactly as long as both sides need it.
//   * Storage::FromDLPack wraps ReadDLPack: it validates and translates the
//     tensor without taking ownership, then keeps the DLManagedTensor alive
//     until the last reference to the imported buffer is gone and calls
//     ReleaseDLPack on it (which runs the producer's deleter).
//
//   GENESIS_ASSIGN_OR_RETURN(
//       DLManagedTensor* managed,
//       ExportDLPack({.data = base, .layout = view, .dtype = DType::kFloat32,
//                     .device = Device::Cuda(0)},
//                    [ref = buffer_ref]() mutable { ref.reset(); }));
//   ...
//   GENESIS_ASSIGN_OR_RETURN(DLPackView in, ReadDLPack(*producer_tensor));
//
// Conventions:
//   * Exported tensors carry the view's first element in DLTensor::data and
//     byte_offset = 0. Some consumers (older PyTorch and CuPy versions) only
//     accept byte_offset == 0, and every consumer accepts it, so the view's
//     offset is folded into the pointer instead of byte_offset.
//   * Exported tensors always have strides filled in (never NULL), also for
//     contiguous views and rank 0; newer DLPack versions require that, and
//     older consumers accept it.
//   * Element types: bool, uint8, int8, int16, int32, int64, float16,
//     bfloat16, float32, float64, each with lanes == 1. bool is DLPack type
//     code 6 with 8 bits (kDLPackBoolCode below; DLPack 0.6 has no name for
//     it, later versions call it kDLBool, and PyTorch uses it).
//   * Devices: kDLCPU <-> Device::Cpu(); kDLCUDAHost (pinned host memory) <->
//     Device::Cpu() with pinned_host set; kDLCUDA <-> Device::Cuda(id).
//   * No data is ever read or written here (the pointers may be device
//     pointers), and nothing checks that the memory really exists.
//   * Errors are InvalidArgument with a message that names the bad value.
#ifndef GENESIS_STORAGE_DLPACK_CONVERT_H_
#define GENESIS_STORAGE_DLPACK_CONVERT_H_

#include <cstdint>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "dlpack/dlpack.h"
#include "genesis/core/device.h"
#include "genesis/core/dtype.h"
#include "genesis/storage/layout.h"

#if defined(DLPACK_VERSION) && DLPACK_VERSION < 60
#error "genesis needs DLPack 0.6 or later (DLDevice, kDLCUDA)"
#endif

namespace genesis::storage {

// The DLPack type code of bool (8 bits, one byte per element, 0 or 1), which
// DLPack 0.6's DLDataTypeCode lacks. Later DLPack versions define it as
// kDLBool = 6, and PyTorch exports and accepts bool tensors with it; the name
// is ours so that it does not clash with kDLBool when the header is newer.
inline constexpr uint8_t kDLPackBoolCode = 6;

// What a DLPack tensor describes, in genesis terms.
//
// Element (i_0, ..., i_{r-1}) of the view is at byte address
//   data + (layout.offset() + i_0 * layout.stride(0) + ...) * ItemSize(dtype),
// so `data` is the address of base element 0 of `layout`. ReadDLPack always
// returns layout.offset() == 0, so there `data` is the address of the view's
// first element (DLTensor::data + byte_offset). ExportDLPack accepts any
// offset, so a Storage can pass its buffer's base pointer and its view as
// they are (see the file comment for where the offset goes).
struct DLPackView {
  // May be null only for an empty view (layout.numel() == 0). A device
  // pointer when `device` is a CUDA device.
  void* data = nullptr;
  Layout layout;
  // Arbitrary default; always set it.
  DType dtype = DType::kFloat32;
  Device device;
  // Pinned (page-locked, cudaMallocHost) host memory: DLPack's kDLCUDAHost.
  // Only meaningful with a CPU device.
  bool pinned_host = false;
};

// The DLDataType of `dtype`: lanes 1, bits 8 * ItemSize(dtype), code kDLInt,
// kDLUInt (uint8), kDLFloat, kDLBfloat (bfloat16) or kDLPackBoolCode (bool).
// FromDLDataType(ToDLDataType(d)) == d for every DType. For a value that is
// not a DType enumerator, returns {code 0, bits 0, lanes 0}, which
// FromDLDataType rejects.
DLDataType ToDLDataType(DType dtype);

// The DType that `type` describes, or InvalidArgument naming the unsupported
// type in words and numbers, e.g. "unsupported DLPack dtype complex64 (code 5
// bits 64 lanes 1); supported: bool, uint8, ...". Vector types (lanes != 1)
// are rejected.
absl::StatusOr<DType> FromDLDataType(DLDataType type);

// Makes a new DLManagedTensor describing `view`, to hand to a DLPack
// consumer. Its DLTensor has:
//   data        = view.data + view.layout.offset() * ItemSize(view.dtype)
//                 (null stays null), byte_offset = 0;
//   ndim, shape = the layout's; strides = the layout's (always filled in);
//   dtype       = ToDLDataType(view.dtype);
//   device      = kDLCPU/0, kDLCUDAHost/0 (pinned_host) or kDLCUDA/index.
// The shape and strides arrays (never null, also for rank 0) live in the
// returned object. Its deleter, which the consumer calls exactly once, frees
// everything ExportDLPack allocated and then runs `release` once (an empty
// `release` is allowed and means there is nothing to run). The deleter may
// run on any thread, so `release` must be safe to run on any thread.
//
// `release` is an rvalue-qualified AnyInvocable rather than a std::function
// so that it can own move-only things (a reference-counted handle, a
// unique_ptr) and so that the type says it runs at most once.
//
// Fails with InvalidArgument, naming the value, if view.dtype is not a DType
// enumerator, view.device is not a valid Device, pinned_host is set on a
// CUDA device, data is null for a non-empty view, or the byte offset or
// extent of the view overflows int64_t. On failure nothing is allocated,
// `release` is not run, and it is destroyed before this returns.
absl::StatusOr<DLManagedTensor*> ExportDLPack(
    const DLPackView& view, absl::AnyInvocable<void() &&> release);

// Validates `managed` and describes it as a DLPackView, without taking
// ownership: the deleter is neither called nor checked (it may be null), and
// the result points into memory that stays valid only until the tensor's
// deleter runs. The result has layout.offset() == 0 and
// data = DLTensor::data + byte_offset (null if DLTensor::data is null).
//
// Accepted, and otherwise rejected with InvalidArgument naming the value:
//   * device: kDLCPU (device_id ignored) -> Cpu; kDLCUDAHost (device_id
//     ignored) -> Cpu with pinned_host; kDLCUDA with 0 <= device_id <=
//     Device::kMaxIndex -> Cuda(device_id). Other types (e.g. kDLROCM,
//     kDLCUDAManaged) are rejected naming the type number.
//   * dtype: as FromDLDataType.
//   * ndim: 0 to kMaxDims; shape non-null when ndim > 0; each shape entry
//     >= 0.
//   * strides: NULL means row-major contiguous (Layout::Contiguous); each
//     entry >= 0 (negative strides are rejected naming the dim).
//   * numel, the extent, and byte_offset + extent * item size fit in
//     int64_t (no view of a real buffer comes near).
//   * byte_offset: a multiple of the item size.
//   * data: null only when the tensor is empty (numel == 0); data +
//     byte_offset + extent * item size does not wrap around the address
//     space.
// Not checked: that the memory exists, the alignment of data (DLPack asks for
// 256-byte aligned data pointers; producers do not all honour it, and
// genesis's CPU loops do not need it).
absl::StatusOr<DLPackView> ReadDLPack(const DLManagedTensor& managed);

// Calls tensor->deleter(tensor) if tensor and its deleter are both non-null;
// otherwise does nothing. After it, `tensor` must not be used. For an
// imported tensor, the owner of the import (Storage::FromDLPack's buffer)
// calls this once, when the last user is gone; for an exported tensor it
// undoes ExportDLPack (running its `release`), for when the tensor never
// reaches a consumer.
void ReleaseDLPack(DLManagedTensor* tensor);

}  // namespace genesis::storage

#endif  // GENESIS_STORAGE_DLPACK_CONVERT_H_
