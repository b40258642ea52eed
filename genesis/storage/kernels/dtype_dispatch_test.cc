#include "genesis/storage/kernels/dtype_dispatch.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "absl/status/status.h"
#include "genesis/core/dtype.h"
#include "gtest/gtest.h"

namespace genesis::storage::kernels {
namespace {

TEST(VisitDTypeTest, CallsWithTheTypeOfEveryDType) {
  for (DType dtype : kAllDTypes) {
    DType seen = static_cast<DType>(255);
    const absl::Status status =
        VisitDType(dtype, "Test", "dtype", [&]<typename T>(TypeTag<T>) {
          seen = DTypeOf<T>();
          return absl::OkStatus();
        });
    EXPECT_TRUE(status.ok()) << status;
    EXPECT_EQ(seen, dtype);
  }
}

TEST(VisitDTypeTest, ReturnsTheVisitorsStatus) {
  const absl::Status status =
      VisitDType(DType::kInt16, "Test", "dtype",
                 [](auto) { return absl::NotFoundError("from the visitor"); });
  EXPECT_EQ(status, absl::NotFoundError("from the visitor"));
}

TEST(VisitDTypeTest, RejectsAValueThatIsNotADType) {
  bool called = false;
  const absl::Status status =
      VisitDType(static_cast<DType>(17), "Convert", "src_type", [&](auto) {
        called = true;
        return absl::OkStatus();
      });
  EXPECT_FALSE(called);
  EXPECT_EQ(status, absl::InvalidArgumentError(
                        "Convert: src_type = 17 is not a DType (expected 0 "
                        "to 9)"));
  EXPECT_EQ(CheckDType(static_cast<DType>(17), "Convert", "src_type"), status);
  EXPECT_TRUE(CheckDType(DType::kFloat64, "Convert", "src_type").ok());
}

TEST(VisitWordSizeTest, CallsWithTheUnsignedTypeOfThatSize) {
  for (size_t size : {1, 2, 4, 8}) {
    size_t seen = 0;
    const absl::Status status =
        VisitWordSize(size, "Fill", "elem_size", [&]<typename W>(TypeTag<W>) {
          static_assert(std::is_unsigned_v<W>);
          seen = sizeof(W);
          return absl::OkStatus();
        });
    EXPECT_TRUE(status.ok()) << status;
    EXPECT_EQ(seen, size);
  }
}

TEST(VisitWordSizeTest, RejectsOtherSizes) {
  for (size_t size : {0, 3, 5, 16}) {
    const absl::Status status = VisitWordSize(
        size, "Fill", "elem_size", [](auto) { return absl::OkStatus(); });
    EXPECT_EQ(status, absl::InvalidArgumentError(
                          "Fill: elem_size = " + std::to_string(size) +
                          " is not 1, 2, 4 or 8"));
  }
}

}  // namespace
}  // namespace genesis::storage::kernels
