#include "genesis/distributed/internal/terminate_message.h"

#include <stdexcept>
#include <thread>

#include "gtest/gtest.h"

namespace genesis::distributed::internal {
namespace {

TEST(TerminateMessageDeathTest, AnExceptionEscapingAThreadIsNamedBeforeTheAbort) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        SayWhyWhenTerminating();
        std::thread([] { throw std::runtime_error("peer 3 closed the connection"); }).join();
      },
      "genesis: terminating .*uncaught exception .*runtime_error.*: peer 3 closed the "
      "connection");
}

}  // namespace
}  // namespace genesis::distributed::internal
