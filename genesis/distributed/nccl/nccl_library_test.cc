// GENESIS_NCCL_LIBRARY against the NCCL this process loaded. Needs no GPU: only the
// library's file is compared. In a build without NCCL every call says so.
#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "genesis/distributed/nccl/nccl_communicator.h"
#include "gtest/gtest.h"

namespace genesis::distributed::nccl_backend {
namespace {

class NcclLibraryTest : public ::testing::Test {
 protected:
  void TearDown() override { unsetenv("GENESIS_NCCL_LIBRARY"); }
};

TEST_F(NcclLibraryTest, NamesTheRequestedAndTheLoadedLibrary) {
  if (!NcclVersion().ok()) {
    EXPECT_EQ(CheckRequestedLibrary().code(), absl::StatusCode::kFailedPrecondition);
    GTEST_SKIP() << "no NCCL in this build: " << NcclVersion().status();
  }
  const std::string loaded = NcclLibrary();
  ASSERT_FALSE(loaded.empty());
  EXPECT_TRUE(CheckRequestedLibrary().ok());  // Unset: whatever the loader chose.
  setenv("GENESIS_NCCL_LIBRARY", loaded.c_str(), 1);
  EXPECT_TRUE(CheckRequestedLibrary().ok()) << CheckRequestedLibrary();

  setenv("GENESIS_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
  absl::Status missing = CheckRequestedLibrary();
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument) << missing;
  EXPECT_TRUE(absl::StrContains(missing.message(),
                                "GENESIS_NCCL_LIBRARY='/nonexistent/libnccl.so.2' cannot be loaded"))
      << missing;

  const std::string other = std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR")
                                                                      : "/tmp") +
                            "/libnccl.so.2";
  ASSERT_EQ(std::system(("cp " + loaded + " " + other).c_str()), 0);
  setenv("GENESIS_NCCL_LIBRARY", other.c_str(), 1);
  absl::Status elsewhere = CheckRequestedLibrary();
  EXPECT_EQ(elsewhere.code(), absl::StatusCode::kFailedPrecondition) << elsewhere;
  EXPECT_TRUE(absl::StrContains(elsewhere.message(), "from " + loaded)) << elsewhere;
  EXPECT_TRUE(absl::StrContains(elsewhere.message(), "first in LD_LIBRARY_PATH")) << elsewhere;
}

}  // namespace
}  // namespace genesis::distributed::nccl_backend
