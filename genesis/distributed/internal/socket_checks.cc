#include "genesis/distributed/internal/socket_checks.h"

#include <cerrno>
#include <cstring>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "genesis/core/absl_compat.h"

namespace genesis::distributed::internal {

absl::StatusOr<std::string> ResolveHost(std::string_view variable, std::string_view host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string name(host);
  const int rc = getaddrinfo(name.c_str(), nullptr, &hints, &found);
  if (rc != 0 || found == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(ToAbsl(variable), "=", Quoted(host),
                                                   " does not resolve: ", gai_strerror(rc)));
  }
  const addrinfo* pick = found;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      pick = a;
      break;
    }
  }
  char text[INET6_ADDRSTRLEN] = {};
  const void* raw = pick->ai_family == AF_INET
                        ? static_cast<const void*>(
                              &reinterpret_cast<const sockaddr_in*>(pick->ai_addr)->sin_addr)
                        : static_cast<const void*>(
                              &reinterpret_cast<const sockaddr_in6*>(pick->ai_addr)->sin6_addr);
  inet_ntop(pick->ai_family, raw, text, sizeof(text));
  freeaddrinfo(found);
  return std::string(text);
}

std::string HostPort(std::string_view ip, int port) {
  return absl::StrContains(ToAbsl(ip), ":") ? absl::StrCat("[", ToAbsl(ip), "]:", port)
                                            : absl::StrCat(ToAbsl(ip), ":", port);
}

absl::Status CheckCanListen(std::string_view ip, int port, std::string_view what) {
  sockaddr_storage address{};
  socklen_t length = 0;
  const std::string text(ip);
  auto* v4 = reinterpret_cast<sockaddr_in*>(&address);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&address);
  if (inet_pton(AF_INET, text.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    length = sizeof(sockaddr_in);
  } else if (inet_pton(AF_INET6, text.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    length = sizeof(sockaddr_in6);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(Quoted(ip), " is not a numeric address (", ToAbsl(what), ")"));
  }
  const int fd = socket(address.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("socket(): ", std::strerror(errno)));
  }
  const int on = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));  // TIME_WAIT is no obstacle.
  int error = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), length) != 0 || listen(fd, 1) != 0) {
    error = errno;
  }
  close(fd);
  const std::string where = absl::StrCat(HostPort(ip, port), " (", ToAbsl(what), ")");
  if (error == EADDRINUSE) {
    return absl::UnavailableError(
        absl::StrCat(where, " is in use by another process or job: choose another port"));
  }
  if (error == EADDRNOTAVAIL) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " is not an address of this host, where rank 0 listens"));
  }
  if (error != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", where, ": ", std::strerror(error)));
  }
  return absl::OkStatus();
}

}  // namespace genesis::distributed::internal
