#include "genesis/storage/kernels/fill.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "genesis/core/absl_compat.h"
#include "genesis/core/dtype.h"
#include "genesis/core/status.h"
#include "genesis/storage/convert_rules.h"
#include "genesis/storage/kernels/dtype_dispatch.h"

namespace genesis::storage::kernels {
namespace fill_internal {
namespace {

// The checks both fills share: numel >= 0, numel * elem_size fits int64_t
// (elem_size > 0), and a non-null dst when there is something to write.
absl::Status CheckDestination(const void* dst, int64_t numel, size_t elem_size,
                              std::string_view function) {
  if (numel < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(ToAbsl(function), ": numel = ", numel, " is negative"));
  }
  if (static_cast<uint64_t>(numel) >
      static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / elem_size) {
    return absl::InvalidArgumentError(
        absl::StrCat(ToAbsl(function), ": numel = ", numel, " elements of ",
                     elem_size, " bytes overflow int64_t"));
  }
  if (dst == nullptr && numel > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(ToAbsl(function), ": dst is null but numel = ", numel));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckFill(const void* dst, int64_t numel, const void* pattern,
                       size_t elem_size, std::string_view function) {
  GENESIS_RETURN_IF_ERROR(CheckWordSize(elem_size, function, "elem_size"));
  GENESIS_RETURN_IF_ERROR(CheckDestination(dst, numel, elem_size, function));
  if (pattern == nullptr && numel > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        ToAbsl(function), ": pattern is null but numel = ", numel));
  }
  return absl::OkStatus();
}

absl::Status CheckArange(const void* dst, int64_t numel, DType dtype,
                         std::string_view function) {
  GENESIS_RETURN_IF_ERROR(CheckDType(dtype, function, "dtype"));
  return CheckDestination(dst, numel, ItemSize(dtype), function);
}

}  // namespace fill_internal

absl::StatusOr<ElementBytes> ScalarPattern(double value, DType dtype) {
  ElementBytes bytes{};
  GENESIS_RETURN_IF_ERROR(
      VisitDType(dtype, "ScalarPattern", "dtype", [&]<typename T>(TypeTag<T>) {
        const T element = ConvertValue<T>(value);
        std::memcpy(bytes.data(), &element, sizeof(T));
        return absl::OkStatus();
      }));
  return bytes;
}

absl::Status FillHost(void* dst, int64_t numel, const void* pattern,
                      size_t elem_size) {
  GENESIS_RETURN_IF_ERROR(
      fill_internal::CheckFill(dst, numel, pattern, elem_size, "FillHost"));
  if (numel == 0) return absl::OkStatus();
  return VisitWordSize(
      elem_size, "FillHost", "elem_size", [&]<typename Word>(TypeTag<Word>) {
        Word word;
        std::memcpy(&word, pattern, sizeof(Word));
        char* out = static_cast<char*>(dst);
        for (int64_t i = 0; i < numel; ++i) {
          std::memcpy(out + i * static_cast<int64_t>(sizeof(Word)), &word,
                      sizeof(Word));
        }
        return absl::OkStatus();
      });
}

absl::Status ArangeHost(void* dst, int64_t numel, double start, double step,
                        DType dtype) {
  GENESIS_RETURN_IF_ERROR(
      fill_internal::CheckArange(dst, numel, dtype, "ArangeHost"));
  return VisitDType(dtype, "ArangeHost", "dtype", [&]<typename T>(TypeTag<T>) {
    char* out = static_cast<char*>(dst);
    for (int64_t i = 0; i < numel; ++i) {
      const T element = ConvertValue<T>(ArangeValue(start, step, i));
      std::memcpy(out + i * static_cast<int64_t>(sizeof(T)), &element,
                  sizeof(T));
    }
    return absl::OkStatus();
  });
}

}  // namespace genesis::storage::kernels
