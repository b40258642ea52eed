// Runs the backend-independent pool suite over HostBackend, plus HostBackend's own checks.
#include <memory>

#include "gtest/gtest.h"
#include "genesis/memory/allocator_suite.h"
#include "genesis/memory/host_backend.h"

namespace genesis::memory {
namespace {

INSTANTIATE_TEST_SUITE_P(Host, AllocatorSuite,
                         ::testing::Values(BackendFactory{
                             "host", [] { return std::make_unique<HostBackend>(); }}),
                         BackendFactoryName);

TEST(HostBackendTest, AlignsAndReportsMemory) {
  HostBackend backend(100);
  EXPECT_EQ(backend.alignment(), 128u);
  EXPECT_EQ(HostBackend().alignment(), 512u);
  auto p = backend.AllocateSegment(1000);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*p) % 128, 0u);
  backend.FreeSegment(*p, 1000);
  EXPECT_FALSE(backend.AllocateSegment(0).ok());
  auto huge = backend.AllocateSegment(~size_t{0} - 8);
  EXPECT_FALSE(huge.ok());
  auto info = backend.MemoryInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_GT(info->total_bytes, 0u);
  EXPECT_LE(info->free_bytes, info->total_bytes);
  EXPECT_EQ(backend.kind(), MemoryKind::kHost);
  EXPECT_EQ(MemoryKindName(MemoryKind::kPinnedHost), "pinned_host");
}

}  // namespace
}  // namespace genesis::memory
