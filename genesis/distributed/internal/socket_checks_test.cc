#include "genesis/distributed/internal/socket_checks.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace genesis::distributed::internal {
namespace {

TEST(SocketChecksTest, ResolvesNamesAndNamesTheVariableWhenItCannot) {
  absl::StatusOr<std::string> ip = ResolveHost("MASTER_ADDR", "localhost");
  ASSERT_TRUE(ip.ok()) << ip.status();
  EXPECT_TRUE(*ip == "127.0.0.1" || *ip == "::1") << *ip;
  EXPECT_EQ(*ResolveHost("MASTER_ADDR", "127.0.0.1"), "127.0.0.1");
  absl::Status bad = ResolveHost("MASTER_ADDR", "no-such-host.invalid").status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(bad.message(), "MASTER_ADDR='no-such-host.invalid' does not "
                                               "resolve"))
      << bad;
}

TEST(SocketChecksTest, HostPortBracketsIpv6) {
  EXPECT_EQ(HostPort("127.0.0.1", 29501), "127.0.0.1:29501");
  EXPECT_EQ(HostPort("::1", 29501), "[::1]:29501");
}

TEST(SocketChecksTest, APortSomeoneListensOnIsNamedInUse) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t length = sizeof(address);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const int port = ntohs(address.sin_port);
  absl::Status taken = CheckCanListen("127.0.0.1", port, "NCCL's bootstrap root");
  EXPECT_EQ(taken.code(), absl::StatusCode::kUnavailable) << taken;
  EXPECT_TRUE(absl::StrContains(taken.message(), "(NCCL's bootstrap root) is in use")) << taken;
  close(fd);
  EXPECT_TRUE(CheckCanListen("127.0.0.1", port, "free again").ok());
}

TEST(SocketChecksTest, AnAddressOfAnotherHostIsRefused) {
  absl::Status status = CheckCanListen("192.0.2.77", 29501, "rendezvous");  // TEST-NET-1.
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "not an address of this host")) << status;
  EXPECT_EQ(CheckCanListen("node0", 1, "x").code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace genesis::distributed::internal
