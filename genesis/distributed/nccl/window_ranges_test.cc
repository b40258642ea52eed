#include "genesis/distributed/nccl/window_ranges.h"

#include <cstdint>
#include <utility>

#include "gtest/gtest.h"

namespace genesis::distributed::nccl_backend {
namespace {

const void* At(uintptr_t address) { return reinterpret_cast<const void*>(address); }

bool Contains(const WindowRanges& w, uintptr_t address, size_t bytes) {
  const std::pair<const void*, size_t> buffer[] = {{At(address), bytes}};
  return w.ContainsAll(buffer);
}

TEST(WindowRangesTest, BuffersInsideAWindowAndNoOthers) {
  WindowRanges w;
  EXPECT_FALSE(Contains(w, 0x10000, 16));  // No window yet.
  w.Add(At(0x10000), 0x1000);
  EXPECT_TRUE(Contains(w, 0x10000, 0x1000));
  EXPECT_TRUE(Contains(w, 0x10800, 0x800));
  EXPECT_FALSE(Contains(w, 0x10800, 0x801));  // Runs past the end.
  EXPECT_FALSE(Contains(w, 0xff00, 0x10));    // Before it.
  // Beyond the window's end: the offset from its start exceeds its size (an unsigned
  // end - address would wrap to a huge size and take any buffer there for inside).
  EXPECT_FALSE(Contains(w, 0x20000, 0x10));
  EXPECT_TRUE(Contains(w, 0x11000, 0));  // Empty, at the end.
  EXPECT_FALSE(Contains(w, 0x11001, 0));
}

TEST(WindowRangesTest, EveryBufferMustLieInAWindow) {
  WindowRanges w;
  w.Add(At(0x10000), 0x1000);
  w.Add(At(0x40000), 0x1000);
  const std::pair<const void*, size_t> both[] = {{At(0x10100), 0x100}, {At(0x40100), 0x100}};
  EXPECT_TRUE(w.ContainsAll(both));
  const std::pair<const void*, size_t> one_out[] = {{At(0x10100), 0x100}, {At(0x30000), 0x100}};
  EXPECT_FALSE(w.ContainsAll(one_out));
  EXPECT_FALSE(w.ContainsAll({}));
  w.Remove(At(0x40000));
  EXPECT_FALSE(w.ContainsAll(both));
  w.Remove(At(0x50000));  // Not a window: nothing happens.
  EXPECT_TRUE(Contains(w, 0x10000, 0x10));
}

}  // namespace
}  // namespace genesis::distributed::nccl_backend
