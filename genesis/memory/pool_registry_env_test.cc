// GENESIS_ALLOC_CONF is read when the first pool is made; a bad one is an error from
// every pool accessor, naming the key, and never a crash.
#include <cstdlib>
#include <string>

#include "genesis/memory/pool_registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace genesis::memory {
namespace {

using ::testing::HasSubstr;

TEST(PoolRegistryEnvTest, BadConfigIsReportedByEveryPoolAccessor) {
  ASSERT_EQ(setenv("GENESIS_ALLOC_CONF", "cache_limit:2GB,max_splitsize:1GB", 1), 0);
  for (int attempt = 0; attempt < 2; ++attempt) {
    const absl::Status status = HostPool().status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(status.message()), HasSubstr("max_splitsize"));
    EXPECT_THAT(std::string(status.message()), HasSubstr("GENESIS_ALLOC_CONF"));
  }
  EXPECT_FALSE(PoolFor(Device::Cpu()).ok());
}

}  // namespace
}  // namespace genesis::memory
