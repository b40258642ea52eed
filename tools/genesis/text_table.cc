#include "tools/genesis/text_table.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace genesis::cli {

TextTable::TextTable(std::vector<std::string> header) { rows_.push_back(std::move(header)); }

void TextTable::AddRow(std::vector<std::string> row) { rows_.push_back(std::move(row)); }

std::string TextTable::Render(int indent) const {
  std::vector<size_t> widths;
  for (const auto& row : rows_) {
    if (row.size() > widths.size()) widths.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  const std::string pad(indent, ' ');
  auto render_row = [&](const std::vector<std::string>& row) {
    std::string line = pad;
    for (size_t i = 0; i < widths.size(); ++i) {
      const std::string& cell = i < row.size() ? row[i] : std::string();
      absl::StrAppend(&line, cell);
      if (i + 1 < widths.size()) line.append(widths[i] - cell.size() + 2, ' ');
    }
    line.erase(line.find_last_not_of(' ') + 1);
    return line + "\n";
  };
  std::string out = render_row(rows_[0]);
  size_t total = 0;
  for (size_t w : widths) total += w;
  if (!widths.empty()) total += 2 * (widths.size() - 1);
  absl::StrAppend(&out, pad, std::string(total, '-'), "\n");
  for (size_t r = 1; r < rows_.size(); ++r) out += render_row(rows_[r]);
  return out;
}

}  // namespace genesis::cli
