#include "tools/genesis/text_table.h"

#include "gtest/gtest.h"

namespace genesis::cli {
namespace {

TEST(TextTableTest, AlignsColumnsToTheWidestCell) {
  TextTable t({"a", "bbb"});
  EXPECT_EQ(t.num_rows(), 0u);
  t.AddRow({"cccc", "d"});
  EXPECT_EQ(t.num_rows(), 1u);
  EXPECT_EQ(t.Render(), "a     bbb\n---------\ncccc  d\n");
}

TEST(TextTableTest, IndentsAndPadsShortRowsWithoutTrailingSpaces) {
  TextTable t({"x", "y", "z"});
  t.AddRow({"1"});
  EXPECT_EQ(t.Render(2), "  x  y  z\n  -------\n  1\n");
}

TEST(TextTableTest, ExtraCellsWidenTheTable) {
  TextTable t({"x"});
  t.AddRow({"1", "22"});
  EXPECT_EQ(t.Render(), "x\n-----\n1  22\n");
}

}  // namespace
}  // namespace genesis::cli
