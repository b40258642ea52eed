#include "tools/genesis/text_table.h"

#include "gtest/gtest.h"

namespace genesis::cli {
namespace {

TEST(TextTableTest, AlignsColumnsToTheWidestCell) {
  TextTable t({"a", "bbb"});
  t.AddRow({"cccc", "d"});
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

TEST(FormatBytesTest, UsesBinaryUnits) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(1024), "1.0 KiB");
  EXPECT_EQ(FormatBytes(512ull << 20), "512.0 MiB");
  EXPECT_EQ(FormatBytes(150'754'820'096ull), "140.4 GiB");
  EXPECT_EQ(FormatBytes(3ull << 50), "3.0 PiB");
  EXPECT_EQ(FormatBytes(~0ull), "16384.0 PiB");
}

}  // namespace
}  // namespace genesis::cli
