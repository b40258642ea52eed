// A backend-independent test suite for CachingAllocator, instantiated once per Backend.
//
// Every backend (HostBackend, TestBackend, and in a CUDA build the device and pinned
// backends) must give a pool the same guarantees, so the checks are written once against
// a backend factory. The suite never reads or writes the memory it allocates (device
// memory is not host-addressable); it checks addresses, sizes, snapshots and stats.
// A test file instantiates it for its backend:
//
//   INSTANTIATE_TEST_SUITE_P(Host, AllocatorSuite,
//       ::testing::Values(BackendFactory{"host", [] {
//         return std::make_unique<HostBackend>(); }}),
//       BackendFactoryName);
#ifndef GENESIS_MEMORY_ALLOCATOR_SUITE_H_
#define GENESIS_MEMORY_ALLOCATOR_SUITE_H_

#include <functional>
#include <memory>
#include <ostream>
#include <string>

#include "gtest/gtest.h"
#include "genesis/memory/allocator_options.h"
#include "genesis/memory/backend.h"
#include "genesis/memory/caching_allocator.h"

namespace genesis::memory {

struct BackendFactory {
  std::string name;
  std::function<std::unique_ptr<Backend>()> make;
};

// So that gtest names a failing instance by its backend, not by its bytes.
inline void PrintTo(const BackendFactory& factory, std::ostream* os) { *os << factory.name; }

// For INSTANTIATE_TEST_SUITE_P: names each instance after its factory.
std::string BackendFactoryName(const ::testing::TestParamInfo<BackendFactory>& info);

class AllocatorSuite : public ::testing::TestWithParam<BackendFactory> {
 protected:
  // A pool over a fresh backend from the factory; fails the test if Create fails.
  std::unique_ptr<CachingAllocator> MakePool(AllocatorOptions options = {});
};

// Checks what must hold for any pool whenever no call is in flight: per pool, reserved
// == allocated + cached, active >= allocated, current == allocated - freed totals,
// inactive_split <= cached; the pools add up to "all"; snapshot blocks tile their
// segments and agree with the stats. Returns a description of the first violation, or
// "" if none.
std::string CheckPoolInvariants(const CachingAllocator& pool);

}  // namespace genesis::memory

#endif  // GENESIS_MEMORY_ALLOCATOR_SUITE_H_
