// Checks of a rendezvous address made before anything connects, so that a bad
// MASTER_ADDR or a taken port is named at once instead of surfacing as a timeout.
#ifndef GENESIS_DISTRIBUTED_INTERNAL_SOCKET_CHECKS_H_
#define GENESIS_DISTRIBUTED_INTERNAL_SOCKET_CHECKS_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace genesis::distributed::internal {

// The numeric address (IPv4 preferred) that `host` resolves to. InvalidArgument naming
// `variable` and the resolver's reason when it does not resolve.
absl::StatusOr<std::string> ResolveHost(std::string_view variable, std::string_view host);

// "ip:port", with IPv6 addresses in brackets.
std::string HostPort(std::string_view ip, int port);

// OK if a listening socket could be bound to `ip`:`port` now (TIME_WAIT leftovers of an
// earlier job do not count). Unavailable when another socket listens there ("... is in
// use"), InvalidArgument when `ip` is not an address of this host; `what` says what the
// port is for.
absl::Status CheckCanListen(std::string_view ip, int port, std::string_view what);

}  // namespace genesis::distributed::internal

#endif  // GENESIS_DISTRIBUTED_INTERNAL_SOCKET_CHECKS_H_
