#include "genesis/storage/kernels/dtype_dispatch.h"

#include <cstddef>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "genesis/core/absl_compat.h"
#include "genesis/core/dtype.h"

namespace genesis::storage::kernels {

absl::Status CheckDType(DType dtype, std::string_view function,
                        std::string_view argument) {
  if (ItemSize(dtype) != 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      ToAbsl(function), ": ", ToAbsl(argument), " = ", static_cast<int>(dtype),
      " is not a DType (expected 0 to ", kAllDTypes.size() - 1, ")"));
}

absl::Status CheckWordSize(size_t size, std::string_view function,
                           std::string_view argument) {
  if (size == 1 || size == 2 || size == 4 || size == 8) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(ToAbsl(function), ": ",
                                                 ToAbsl(argument), " = ", size,
                                                 " is not 1, 2, 4 or 8"));
}

}  // namespace genesis::storage::kernels
