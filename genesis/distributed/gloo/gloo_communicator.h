// GlooCommunicator: collectives of CPU memory over Gloo's TCP transport.
//
// Gloo's collectives block the calling thread, so each communicator runs them, in the
// order they were called, on a worker thread of its own; point-to-point transfers are
// posted at once on the calling thread (so a send never waits behind a receive) and
// completed by a second thread. Every operation carries the group's timeout: a peer
// that died or called another operation turns into an error within it, and the first
// error makes the communicator unusable.
#ifndef GENESIS_DISTRIBUTED_GLOO_GLOO_COMMUNICATOR_H_
#define GENESIS_DISTRIBUTED_GLOO_GLOO_COMMUNICATOR_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "genesis/distributed/communicator.h"
#include "genesis/distributed/store.h"

namespace genesis::distributed::gloo_backend {

// Connects rank `info.rank` of `info.size` through `store` (keys under `info.name`),
// listening on `hostname` (an address the other ranks can reach; "127.0.0.1" when all
// run on one host). Blocks until every rank has connected or `info.timeout` has passed
// (DeadlineExceeded naming the group). `info.device` must be the CPU. The first call
// sets SIGPIPE to be ignored when it still has its default action (which would kill the
// process when a peer dies, instead of failing the operation); a handler the program
// installed is left alone. It also installs a std::terminate handler that names an
// exception escaping one of Gloo's threads before the process ends
// (internal/terminate_message.h).
absl::StatusOr<std::unique_ptr<Communicator>> ConnectGloo(GroupInfo info,
                                                          std::shared_ptr<Store> store,
                                                          const std::string& hostname);

// The version of the Gloo headers this build uses, "0.5.0".
std::string GlooVersion();

}  // namespace genesis::distributed::gloo_backend

#endif  // GENESIS_DISTRIBUTED_GLOO_GLOO_COMMUNICATOR_H_
