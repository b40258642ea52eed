// Runs the backend-independent pool suite over TestBackend (as host and as fake CUDA),
// with classic and with expandable segments.
#include <memory>

#include "gtest/gtest.h"
#include "genesis/memory/allocator_suite.h"
#include "genesis/memory/test_backend.h"

namespace genesis::memory {
namespace {

INSTANTIATE_TEST_SUITE_P(
    Test, AllocatorSuite,
    ::testing::Values(
        BackendFactory{"test_host", [] { return std::make_unique<TestBackend>(); }},
        BackendFactory{"fake_cuda", [] { return TestBackend::FakeCuda(); }},
        // Large blocks in expandable segments over the host emulation of virtual memory.
        BackendFactory{"fake_cuda_expandable",
                       [] { return TestBackend::FakeCuda(kNoLimit, /*virtual_memory=*/true); }},
        BackendFactory{"test_host_expandable", [] {
                         TestBackend::Options options;
                         options.virtual_memory = true;
                         options.granularity = 64 << 10;
                         return std::make_unique<TestBackend>(options);
                       }}),
    BackendFactoryName);

}  // namespace
}  // namespace genesis::memory
