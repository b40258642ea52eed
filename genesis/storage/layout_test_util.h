// Test helper: what a Layout means, written independently of layout.cc, for checking
// views and copies against it.
#ifndef GENESIS_STORAGE_LAYOUT_TEST_UTIL_H_
#define GENESIS_STORAGE_LAYOUT_TEST_UTIL_H_

#include <cstdint>
#include <vector>

#include "genesis/storage/layout.h"

namespace genesis::storage {

// The base index of every element of `layout`, in row-major order.
inline std::vector<int64_t> BaseIndices(const Layout& layout) {
  std::vector<int64_t> out;
  if (layout.numel() == 0) return out;
  std::vector<int64_t> index(layout.rank(), 0);
  while (true) {
    int64_t at = layout.offset();
    for (int d = 0; d < layout.rank(); ++d) at += index[d] * layout.stride(d);
    out.push_back(at);
    int d = layout.rank() - 1;
    for (; d >= 0; --d) {
      if (++index[d] < layout.size(d)) break;
      index[d] = 0;
    }
    if (d < 0) return out;
  }
}

}  // namespace genesis::storage

#endif  // GENESIS_STORAGE_LAYOUT_TEST_UTIL_H_
