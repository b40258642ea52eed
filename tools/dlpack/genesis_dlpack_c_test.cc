#include "tools/dlpack/genesis_dlpack_c.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(GenesisDLPackCTest, ExportImportFillRead) {
  genesis_storage* a = nullptr;
  ASSERT_EQ(genesis_arange("cpu", "float32", 0, 6, 1, &a), 0) << genesis_last_error();
  EXPECT_EQ(genesis_numel(a), 6);
  EXPECT_THAT(genesis_describe(a), HasSubstr("float32[6] cpu"));
  DLManagedTensor* tensor = nullptr;
  ASSERT_EQ(genesis_to_dlpack(a, &tensor), 0);
  EXPECT_EQ(tensor->dl_tensor.data, genesis_data_ptr(a));
  genesis_storage* b = nullptr;
  ASSERT_EQ(genesis_from_dlpack(tensor, &b), 0) << genesis_last_error();
  EXPECT_EQ(genesis_data_ptr(b), genesis_data_ptr(a));
  ASSERT_EQ(genesis_fill(b, 2.5), 0);
  std::vector<double> values(6);
  ASSERT_EQ(genesis_to_float64(a, values.data(), 6), 0);
  EXPECT_THAT(values, ElementsAre(2.5, 2.5, 2.5, 2.5, 2.5, 2.5));
  genesis_storage_free(a);  // b keeps the memory alive through the DLPack tensor.
  ASSERT_EQ(genesis_to_float64(b, values.data(), 6), 0);
  EXPECT_EQ(values[5], 2.5);
  genesis_storage_free(b);
}

TEST(GenesisDLPackCTest, ErrorsAreReported) {
  genesis_storage* s = nullptr;
  EXPECT_EQ(genesis_arange("gpu:0", "float32", 0, 1, 1, &s), -1);
  EXPECT_THAT(genesis_last_error(), HasSubstr("gpu:0"));
  EXPECT_EQ(genesis_arange("cpu", "complex", 0, 1, 1, &s), -1);
  EXPECT_THAT(genesis_last_error(), HasSubstr("complex"));
  EXPECT_EQ(genesis_arange("cpu", "int8", 0, 1, 0, &s), -1);
  EXPECT_THAT(genesis_last_error(), HasSubstr("step 0"));
  EXPECT_EQ(genesis_from_dlpack(nullptr, &s), -1);
  ASSERT_EQ(genesis_arange("cpu", "int8", 0, 4, 1, &s), 0);
  std::vector<double> values(3);
  EXPECT_EQ(genesis_to_float64(s, values.data(), 3), -1);
  EXPECT_THAT(genesis_last_error(), HasSubstr("bytes"));
  genesis_storage_free(s);
}

}  // namespace
