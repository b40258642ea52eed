#include "genesis/storage/dlpack_convert.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "dlpack/dlpack.h"
#include "genesis/core/absl_compat.h"
#include "genesis/core/device.h"
#include "genesis/core/dtype.h"
#include "genesis/core/status.h"
#include "genesis/storage/layout.h"

namespace genesis::storage {
namespace {

// DLDeviceType is a C enum without a fixed underlying type; a producer may
// put any int32 in it. It is read through memcpy so that an out-of-range
// value is not an out-of-range enum load.
static_assert(sizeof(DLDeviceType) == sizeof(int32_t));

int32_t DeviceTypeNumber(const DLDevice& device) {
  int32_t number;
  std::memcpy(&number, &device.device_type, sizeof(number));
  return number;
}

// The names of the device types of DLPack 1.x, for error messages.
std::string_view DeviceTypeName(int32_t type) {
  switch (type) {
    case 1:
      return "kDLCPU";
    case 2:
      return "kDLCUDA";
    case 3:
      return "kDLCUDAHost";
    case 4:
      return "kDLOpenCL";
    case 7:
      return "kDLVulkan";
    case 8:
      return "kDLMetal";
    case 9:
      return "kDLVPI";
    case 10:
      return "kDLROCM";
    case 11:
      return "kDLROCMHost";
    case 12:
      return "kDLExtDev";
    case 13:
      return "kDLCUDAManaged";
    case 14:
      return "kDLOneAPI";
    case 15:
      return "kDLWebGPU";
    case 16:
      return "kDLHexagon";
    case 17:
      return "kDLMAIA";
    case 18:
      return "kDLTrn";
  }
  return "";
}

// "complex64", "float8_e4m3fn", "float32x4", "code 42": the type in words,
// with the names of DLPack 1.x's type codes (some of which genesis does not
// support).
std::string DLDataTypeName(DLDataType type) {
  const int bits = type.bits;
  std::string name;
  switch (type.code) {
    case kDLInt:
      name = absl::StrCat("int", bits);
      break;
    case kDLUInt:
      name = absl::StrCat("uint", bits);
      break;
    case kDLFloat:
      name = absl::StrCat("float", bits);
      break;
    case kDLOpaqueHandle:
      name = "opaque handle";
      break;
    case kDLBfloat:
      name = absl::StrCat("bfloat", bits);
      break;
    case kDLComplex:
      name = absl::StrCat("complex", bits);
      break;
    case kDLPackBoolCode:
      name = bits == 8 ? "bool" : absl::StrCat(bits, "-bit bool");
      break;
    case 7:
      name = "float8_e3m4";
      break;
    case 8:
      name = "float8_e4m3";
      break;
    case 9:
      name = "float8_e4m3b11fnuz";
      break;
    case 10:
      name = "float8_e4m3fn";
      break;
    case 11:
      name = "float8_e4m3fnuz";
      break;
    case 12:
      name = "float8_e5m2";
      break;
    case 13:
      name = "float8_e5m2fnuz";
      break;
    case 14:
      name = "float8_e8m0fnu";
      break;
    case 15:
      name = "float6_e2m3fn";
      break;
    case 16:
      name = "float6_e3m2fn";
      break;
    case 17:
      name = "float4_e2m1fn";
      break;
    default:
      return absl::StrCat("code ", static_cast<int>(type.code));
  }
  if (type.lanes != 1) {
    absl::StrAppend(&name, "x", static_cast<int>(type.lanes));
  }
  return name;
}

std::string SupportedDTypes() {
  std::string out;
  for (DType dtype : kAllDTypes) {
    absl::StrAppend(&out, out.empty() ? "" : ", ", ToAbsl(DTypeName(dtype)));
  }
  return out;
}

absl::Status CheckDType(DType dtype) {
  if (ItemSize(dtype) != 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "dtype ", static_cast<int>(dtype), " is not a DType (expected 0 to ",
      kAllDTypes.size() - 1, ")"));
}

absl::StatusOr<DLDevice> ToDLDevice(const Device& device, bool pinned_host) {
  if (device.type() == DeviceType::kCpu && device.index() == 0) {
    return DLDevice{pinned_host ? kDLCUDAHost : kDLCPU, 0};
  }
  if (device.type() == DeviceType::kCuda && device.index() >= 0 &&
      device.index() <= Device::kMaxIndex) {
    if (pinned_host) {
      return absl::InvalidArgumentError(
          absl::StrCat("pinned_host is set on device ", device.ToString(),
                       "; pinned host memory (kDLCUDAHost) is a CPU device"));
    }
    return DLDevice{kDLCUDA, device.index()};
  }
  // Only reachable through a Device built against its precondition (checked
  // in debug builds only).
  return absl::InvalidArgumentError(
      absl::StrCat("device (type ", static_cast<int>(device.type()), ", index ",
                   device.index(), ") is not a valid Device"));
}

absl::StatusOr<int64_t> CheckedMul(int64_t a, int64_t b,
                                   std::string_view what) {
  int64_t result;
  if (__builtin_mul_overflow(a, b, &result)) {
    return absl::InvalidArgumentError(absl::StrCat(
        ToAbsl(what), " (", a, " * ", b, " bytes) overflows int64_t"));
  }
  return result;
}

// What ExportDLPack allocates: the DLManagedTensor handed out (its
// manager_ctx points back here), the shape and strides arrays it points at,
// and the release to run when the consumer is done.
struct ExportContext {
  DLManagedTensor managed{};
  std::array<int64_t, kMaxDims> shape{};
  std::array<int64_t, kMaxDims> strides{};
  absl::AnyInvocable<void() &&> release;
};

// The deleter of exported tensors. Frees the context first and runs release
// last, so that release may free the memory the tensor described (and even
// anything the context's owner holds) without use-after-free here.
void DeleteExported(DLManagedTensor* self) {
  if (self == nullptr) return;
  auto* context = static_cast<ExportContext*>(self->manager_ctx);
  auto release = std::move(context->release);
  delete context;
  if (release) std::move(release)();
}

}  // namespace

DLDataType ToDLDataType(DType dtype) {
  const auto bits = static_cast<uint8_t>(8 * ItemSize(dtype));
  switch (dtype) {
    case DType::kBool:
      return {kDLPackBoolCode, bits, 1};
    case DType::kUInt8:
      return {kDLUInt, bits, 1};
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kInt64:
      return {kDLInt, bits, 1};
    case DType::kFloat16:
    case DType::kFloat32:
    case DType::kFloat64:
      return {kDLFloat, bits, 1};
    case DType::kBFloat16:
      return {kDLBfloat, bits, 1};
  }
  return {0, 0, 0};
}

absl::StatusOr<DType> FromDLDataType(DLDataType type) {
  if (type.lanes == 1) {
    switch (type.code) {
      case kDLInt:
        switch (type.bits) {
          case 8:
            return DType::kInt8;
          case 16:
            return DType::kInt16;
          case 32:
            return DType::kInt32;
          case 64:
            return DType::kInt64;
        }
        break;
      case kDLUInt:
        if (type.bits == 8) return DType::kUInt8;
        break;
      case kDLFloat:
        switch (type.bits) {
          case 16:
            return DType::kFloat16;
          case 32:
            return DType::kFloat32;
          case 64:
            return DType::kFloat64;
        }
        break;
      case kDLBfloat:
        if (type.bits == 16) return DType::kBFloat16;
        break;
      case kDLPackBoolCode:
        if (type.bits == 8) return DType::kBool;
        break;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unsupported DLPack dtype ", DLDataTypeName(type), " (code ",
      static_cast<int>(type.code), " bits ", static_cast<int>(type.bits),
      " lanes ", static_cast<int>(type.lanes), ")",
      type.lanes == 1 ? "" : "; vector types are not supported, only lanes 1",
      "; supported: ", SupportedDTypes()));
}

absl::StatusOr<DLManagedTensor*> ExportDLPack(
    const DLPackView& view, absl::AnyInvocable<void() &&> release) {
  // Every check comes before the allocation; on failure `release` is
  // destroyed with this frame, unrun.
  GENESIS_RETURN_IF_ERROR(Annotate(CheckDType(view.dtype), "ExportDLPack"));
  absl::StatusOr<DLDevice> device = ToDLDevice(view.device, view.pinned_host);
  GENESIS_RETURN_IF_ERROR(Annotate(device.status(), "ExportDLPack"));
  const Layout& layout = view.layout;
  const auto item_size = static_cast<int64_t>(ItemSize(view.dtype));
  if (view.data == nullptr && layout.numel() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("ExportDLPack: data is null for a non-empty view of ",
                     layout.numel(), " elements (", layout.ToString(), ")"));
  }
  // The bytes from `data` to the end of the furthest element; Layout
  // guarantees offset + extent fits int64_t, in elements but not in bytes.
  absl::StatusOr<int64_t> end_bytes =
      CheckedMul(layout.offset() + layout.extent(), item_size,
                 "offset + extent of the view");
  GENESIS_RETURN_IF_ERROR(Annotate(end_bytes.status(), "ExportDLPack"));

  auto context = std::make_unique<ExportContext>();
  const int rank = layout.rank();
  for (int d = 0; d < rank; ++d) {
    context->shape[d] = layout.size(d);
    context->strides[d] = layout.stride(d);
  }
  DLTensor& tensor = context->managed.dl_tensor;
  tensor.data = view.data == nullptr ? nullptr
                                     : static_cast<char*>(view.data) +
                                           layout.offset() * item_size;
  tensor.device = *device;
  tensor.ndim = rank;
  tensor.dtype = ToDLDataType(view.dtype);
  tensor.shape = context->shape.data();
  tensor.strides = context->strides.data();
  tensor.byte_offset = 0;
  context->release = std::move(release);
  context->managed.manager_ctx = context.get();
  context->managed.deleter = &DeleteExported;
  return &context.release()->managed;
}

absl::StatusOr<DLPackView> ReadDLPack(const DLManagedTensor& managed) {
  const DLTensor& tensor = managed.dl_tensor;
  DLPackView view;

  const int32_t device_type = DeviceTypeNumber(tensor.device);
  switch (device_type) {
    case kDLCPU:
      view.device = Device::Cpu();
      break;
    case kDLCUDAHost:
      view.device = Device::Cpu();
      view.pinned_host = true;
      break;
    case kDLCUDA:
      if (tensor.device.device_id < 0 ||
          tensor.device.device_id > Device::kMaxIndex) {
        return absl::InvalidArgumentError(
            absl::StrCat("ReadDLPack: CUDA device_id ", tensor.device.device_id,
                         " is out of range [0, ", Device::kMaxIndex, "]"));
      }
      view.device = Device::Cuda(tensor.device.device_id);
      break;
    default: {
      const std::string_view name = DeviceTypeName(device_type);
      return absl::InvalidArgumentError(absl::StrCat(
          "ReadDLPack: unsupported device type ", device_type,
          name.empty() ? "" : absl::StrCat(" (", ToAbsl(name), ")"),
          "; supported: kDLCPU (1), kDLCUDA (2), kDLCUDAHost (3)"));
    }
  }

  absl::StatusOr<DType> dtype = FromDLDataType(tensor.dtype);
  GENESIS_RETURN_IF_ERROR(Annotate(dtype.status(), "ReadDLPack"));
  view.dtype = *dtype;
  const auto item_size = static_cast<int64_t>(ItemSize(view.dtype));

  if (tensor.ndim < 0 || tensor.ndim > kMaxDims) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReadDLPack: ndim ", tensor.ndim, " is out of range [0, ",
                     kMaxDims, "]"));
  }
  const int rank = tensor.ndim;
  if (rank > 0 && tensor.shape == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReadDLPack: shape is null with ndim ", rank));
  }
  const absl::Span<const int64_t> shape(tensor.shape, rank);
  for (int d = 0; d < rank; ++d) {
    if (shape[d] < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ReadDLPack: shape[", d, "] = ", shape[d], " is negative (shape [",
          absl::StrJoin(shape, ", "), "])"));
    }
  }
  absl::StatusOr<Layout> layout;
  if (tensor.strides == nullptr) {
    layout = Layout::Contiguous(shape);
  } else {
    const absl::Span<const int64_t> strides(tensor.strides, rank);
    for (int d = 0; d < rank; ++d) {
      if (strides[d] < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "ReadDLPack: strides[", d, "] = ", strides[d], " is negative (dim ",
            d, "); negative strides are not supported"));
      }
    }
    layout = Layout::Strided(shape, strides);
  }
  GENESIS_RETURN_IF_ERROR(Annotate(layout.status(), "ReadDLPack"));
  view.layout = *layout;

  if (tensor.byte_offset % static_cast<uint64_t>(item_size) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReadDLPack: byte_offset ", tensor.byte_offset,
                     " is not a multiple of the item size ", item_size, " of ",
                     ToAbsl(DTypeName(view.dtype))));
  }
  if (tensor.byte_offset >
      static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ReadDLPack: byte_offset ", tensor.byte_offset, " overflows int64_t"));
  }
  const auto byte_offset = static_cast<int64_t>(tensor.byte_offset);
  absl::StatusOr<int64_t> extent_bytes =
      CheckedMul(view.layout.extent(), item_size, "extent of the tensor");
  GENESIS_RETURN_IF_ERROR(Annotate(extent_bytes.status(), "ReadDLPack"));
  int64_t end_bytes;
  if (__builtin_add_overflow(byte_offset, *extent_bytes, &end_bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReadDLPack: byte_offset ", byte_offset, " + extent ",
                     *extent_bytes, " bytes overflows int64_t"));
  }
  // The bytes from data to the end of the furthest element must not wrap
  // around the address space (the pointer arithmetic below and in every
  // user of the view would overflow).
  if (const auto address = reinterpret_cast<uintptr_t>(tensor.data);
      address > std::numeric_limits<uintptr_t>::max() -
                    static_cast<uintptr_t>(end_bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReadDLPack: data 0x", absl::Hex(address), " + ",
                     end_bytes, " bytes wraps around the address space"));
  }

  if (tensor.data == nullptr) {
    if (view.layout.numel() != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ReadDLPack: data is null for a non-empty tensor of ",
          view.layout.numel(), " elements (", view.layout.ToString(), ")"));
    }
    view.data = nullptr;
  } else {
    view.data = static_cast<char*>(tensor.data) + byte_offset;
  }
  return view;
}

void ReleaseDLPack(DLManagedTensor* tensor) {
  if (tensor != nullptr && tensor->deleter != nullptr) {
    tensor->deleter(tensor);
  }
}

}  // namespace genesis::storage
