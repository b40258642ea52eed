// Dispatch from a runtime DType, or a runtime element size, to a C++ type, for
// code that instantiates one loop or one kernel per type: the CPU fills
// (fill.cc) and the CUDA kernels (cuda_kernels.cu), whose device code uses
// CallForDType. The Visit functions check their argument first, so an
// invalid value gives the same InvalidArgument message everywhere:
//
//   return VisitDType(dtype, "ArangeHost", "dtype",
//                     [&]<typename T>(TypeTag<T>) {
//                       ...  // T is bool, uint8_t, ..., float or double.
//                       return absl::OkStatus();
//                     });
#ifndef GENESIS_STORAGE_KERNELS_DTYPE_DISPATCH_H_
#define GENESIS_STORAGE_KERNELS_DTYPE_DISPATCH_H_

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "genesis/core/dtype.h"
#include "genesis/storage/convert_rules.h"  // GENESIS_HOST_DEVICE.

namespace genesis::storage::kernels {

// Carries a type to a generic lambda: [&]<typename T>(TypeTag<T>) { ... }.
template <typename T>
struct TypeTag {
  using type = T;
};

// OK if `dtype` is a DType enumerator; otherwise InvalidArgument
// "<function>: <argument> = 42 is not a DType (expected 0 to 9)".
absl::Status CheckDType(DType dtype, std::string_view function,
                        std::string_view argument);

// OK if `size` is 1, 2, 4 or 8; otherwise InvalidArgument
// "<function>: <argument> = 3 is not 1, 2, 4 or 8".
absl::Status CheckWordSize(size_t size, std::string_view function,
                           std::string_view argument);

namespace dispatch_internal {

// Calls f(TypeTag<CppTypeOf<D>>{}) if dtype is D.
template <DType D, typename F>
GENESIS_HOST_DEVICE bool CallIf(DType dtype, F& f) {
  if (dtype != D) return false;
  f(TypeTag<CppTypeOf<D>>{});
  return true;
}

template <typename F, size_t... kIndex>
GENESIS_HOST_DEVICE void CallForDTypeIn(DType dtype, F& f,
                                        std::index_sequence<kIndex...>) {
  static_cast<void>((CallIf<kAllDTypes[kIndex]>(dtype, f) || ...));
}

}  // namespace dispatch_internal

// Calls f(TypeTag<T>{}) for T the C++ type of `dtype`, and does nothing if
// dtype is not a DType. Usable in CUDA device code (the kernels switch on a
// destination dtype with it).
template <typename F>
GENESIS_HOST_DEVICE void CallForDType(DType dtype, F&& f) {
  dispatch_internal::CallForDTypeIn(
      dtype, f, std::make_index_sequence<kAllDTypes.size()>());
}

// Checks `dtype` like CheckDType (returning its error), then returns
// f(TypeTag<CppTypeOf<dtype>>{}). f returns absl::Status.
template <typename F>
absl::Status VisitDType(DType dtype, std::string_view function,
                        std::string_view argument, F&& f) {
  absl::Status status = CheckDType(dtype, function, argument);
  if (!status.ok()) return status;
  // status is OK, so Update sets it to f's result.
  CallForDType(dtype, [&](auto tag) { status.Update(f(tag)); });
  return status;
}

// Checks `size` like CheckWordSize (returning its error), then returns
// f(TypeTag<W>{}) for W the unsigned integer type of that size (uint8_t,
// uint16_t, uint32_t or uint64_t). f returns absl::Status.
template <typename F>
absl::Status VisitWordSize(size_t size, std::string_view function,
                           std::string_view argument, F&& f) {
  switch (size) {
    case 1:
      return f(TypeTag<uint8_t>{});
    case 2:
      return f(TypeTag<uint16_t>{});
    case 4:
      return f(TypeTag<uint32_t>{});
    case 8:
      return f(TypeTag<uint64_t>{});
    default:
      return CheckWordSize(size, function, argument);
  }
}

}  // namespace genesis::storage::kernels

#endif  // GENESIS_STORAGE_KERNELS_DTYPE_DISPATCH_H_
