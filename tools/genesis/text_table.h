// Plain-text tables for the `genesis` command's readable output.
//
//   TextTable t({"device", "name"});
//   t.AddRow({"cuda:0", "NVIDIA H200"});
//   std::cout << t.Render();
//
// Columns are left-aligned and padded to their widest cell, separated by two spaces.
#ifndef GENESIS_TOOLS_GENESIS_TEXT_TABLE_H_
#define GENESIS_TOOLS_GENESIS_TEXT_TABLE_H_

#include <string>
#include <vector>

namespace genesis::cli {

class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header);

  // Adds a row; missing cells are empty, extra cells are kept (they widen the table).
  void AddRow(std::vector<std::string> row);

  // The header, a rule of dashes and the rows, each line indented by `indent` spaces and
  // ending in a newline; no trailing spaces.
  std::string Render(int indent = 0) const;

  // Rows added so far (the header not counted).
  size_t num_rows() const { return rows_.size() - 1; }

 private:
  std::vector<std::vector<std::string>> rows_;  // rows_[0] is the header.
};

}  // namespace genesis::cli

#endif  // GENESIS_TOOLS_GENESIS_TEXT_TABLE_H_
