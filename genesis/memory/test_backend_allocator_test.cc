// Runs the backend-independent pool suite over TestBackend (as host and as fake CUDA).
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
        BackendFactory{"fake_cuda", [] { return TestBackend::FakeCuda(); }}),
    BackendFactoryName);

}  // namespace
}  // namespace genesis::memory
