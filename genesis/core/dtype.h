// Element types of tensors, and the mapping between them and C++ types.
//
//   genesis::DType t = genesis::DType::kBFloat16;
//   genesis::ItemSize(t);                        // 2
//   genesis::DTypeName(t);                       // "bfloat16"
//   GENESIS_ASSIGN_OR_RETURN(genesis::DType u, genesis::ParseDType("half"));
//   static_assert(genesis::DTypeOf<float>() == genesis::DType::kFloat32);
//   genesis::CppTypeOf<genesis::DType::kFloat16> h;  // genesis::Half
//
// The numeric values of DType are stable (they may be serialised); new
// dtypes are only ever appended.

#ifndef GENESIS_CORE_DTYPE_H_
#define GENESIS_CORE_DTYPE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string_view>
#include <type_traits>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "genesis/core/half.h"

namespace genesis {

enum class DType : uint8_t {
  kBool,
  kUInt8,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kFloat16,
  kBFloat16,
  kFloat32,
  kFloat64,
};

// Every DType, in enum order; for tests and for building lookup tables.
inline constexpr std::array<DType, 10> kAllDTypes = {
    DType::kBool,    DType::kUInt8,   DType::kInt8,    DType::kInt16,
    DType::kInt32,   DType::kInt64,   DType::kFloat16, DType::kBFloat16,
    DType::kFloat32, DType::kFloat64,
};

// Bytes per element (bool is stored as one byte). Returns 0 for a value that
// is not a DType enumerator.
constexpr size_t ItemSize(DType dtype) {
  switch (dtype) {
    case DType::kBool:
    case DType::kUInt8:
    case DType::kInt8:
      return 1;
    case DType::kInt16:
    case DType::kFloat16:
    case DType::kBFloat16:
      return 2;
    case DType::kInt32:
    case DType::kFloat32:
      return 4;
    case DType::kInt64:
    case DType::kFloat64:
      return 8;
  }
  return 0;
}

// The canonical lowercase name: "bool", "uint8", "int8", "int16", "int32",
// "int64", "float16", "bfloat16", "float32", "float64". ParseDType() accepts
// it back. Returns "invalid" for a value that is not a DType enumerator.
constexpr std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kBool:
      return "bool";
    case DType::kUInt8:
      return "uint8";
    case DType::kInt8:
      return "int8";
    case DType::kInt16:
      return "int16";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kFloat16:
      return "float16";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
  }
  return "invalid";
}

// True for float16, bfloat16, float32 and float64.
constexpr bool IsFloatingPoint(DType dtype) {
  return dtype == DType::kFloat16 || dtype == DType::kBFloat16 ||
         dtype == DType::kFloat32 || dtype == DType::kFloat64;
}

// True for uint8 and the signed integer types. bool is not an integer type
// here: it has its own promotion and arithmetic rules.
constexpr bool IsInteger(DType dtype) {
  return dtype == DType::kUInt8 || dtype == DType::kInt8 ||
         dtype == DType::kInt16 || dtype == DType::kInt32 ||
         dtype == DType::kInt64;
}

// True if the type can represent negative values: the signed integers and
// all floating-point types; false for bool and uint8.
constexpr bool IsSigned(DType dtype) {
  return IsFloatingPoint(dtype) || (IsInteger(dtype) && dtype != DType::kUInt8);
}

// Parses a canonical name (see DTypeName) or one of these aliases, which
// follow PyTorch's meaning rather than C's platform-dependent one:
//   float, fp32 -> float32     double, fp64 -> float64
//   half, fp16  -> float16     bf16         -> bfloat16
//   int         -> int32       long         -> int64
//   short       -> int16
// "char" and "byte" are deliberately rejected: their signedness differs
// between C, PyTorch and other frameworks. Matching is case-sensitive.
// Anything else is an InvalidArgument error quoting the input and listing
// the canonical names.
absl::StatusOr<DType> ParseDType(std::string_view name);

// Writes DTypeName(dtype).
std::ostream& operator<<(std::ostream& os, DType dtype);

template <typename Sink>
void AbslStringify(Sink& sink, DType dtype) {
  const std::string_view name = DTypeName(dtype);
  sink.Append(absl::string_view(name.data(), name.size()));
}

namespace dtype_internal {

template <typename T>
struct DTypeOfImpl {};  // No `value`: T is not an element type.
template <DType D>
struct CppTypeOfImpl {};

#define GENESIS_DTYPE_INTERNAL_MAP_(cpp_type, dtype)                      \
  template <>                                                             \
  struct DTypeOfImpl<cpp_type> : std::integral_constant<DType, dtype> {}; \
  template <>                                                             \
  struct CppTypeOfImpl<dtype> {                                           \
    using type = cpp_type;                                                \
  }

GENESIS_DTYPE_INTERNAL_MAP_(bool, DType::kBool);
GENESIS_DTYPE_INTERNAL_MAP_(uint8_t, DType::kUInt8);
GENESIS_DTYPE_INTERNAL_MAP_(int8_t, DType::kInt8);
GENESIS_DTYPE_INTERNAL_MAP_(int16_t, DType::kInt16);
GENESIS_DTYPE_INTERNAL_MAP_(int32_t, DType::kInt32);
GENESIS_DTYPE_INTERNAL_MAP_(int64_t, DType::kInt64);
GENESIS_DTYPE_INTERNAL_MAP_(Half, DType::kFloat16);
GENESIS_DTYPE_INTERNAL_MAP_(BFloat16, DType::kBFloat16);
GENESIS_DTYPE_INTERNAL_MAP_(float, DType::kFloat32);
GENESIS_DTYPE_INTERNAL_MAP_(double, DType::kFloat64);

#undef GENESIS_DTYPE_INTERNAL_MAP_

}  // namespace dtype_internal

// Satisfied by the C++ element types: bool, uint8_t, int8_t, int16_t,
// int32_t, int64_t, Half, BFloat16, float, double (cv-qualifiers ignored).
// Only those exact types: `char` and `long long` are distinct types from
// int8_t / int64_t on common platforms and are rejected at compile time
// rather than guessed at.
template <typename T>
concept ElementType = requires {
  dtype_internal::DTypeOfImpl<std::remove_cv_t<T>>::value;
};

// The DType whose elements are stored as T.
template <ElementType T>
constexpr DType DTypeOf() {
  return dtype_internal::DTypeOfImpl<std::remove_cv_t<T>>::value;
}

// The C++ type that stores elements of dtype D. DTypeOf<CppTypeOf<D>>() == D.
template <DType D>
using CppTypeOf = typename dtype_internal::CppTypeOfImpl<D>::type;

}  // namespace genesis

#endif  // GENESIS_CORE_DTYPE_H_
