// Store: the key-value store through which the ranks of a group find each other.
//
// Gloo's rendezvous stores, not a protocol of our own: a file store on a directory every
// rank can reach (a local one for ranks on one host, a shared file system across nodes,
// as on Slurm clusters), or a hash store in memory for ranks that are threads of one
// process. Gloo groups exchange their addresses through it; NCCL groups can exchange
// NCCL's unique id through it (process_group_factory.h).
//
// A file store's keys are files that outlive the job unless the store removes them: give
// each job its own directory (or its own key prefix through GroupOptions::name), or a
// later run may read an earlier run's addresses. Groups made from a launcher's
// environment do both (process_group_factory.h).
#ifndef GENESIS_DISTRIBUTED_STORE_H_
#define GENESIS_DISTRIBUTED_STORE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace gloo::rendezvous {
class Store;
}

namespace genesis::distributed {

class Store {
 public:
  // A store on `directory`, created (with its parents) if missing. A `shared` store's
  // directory belongs to the group whose ranks open it (one Store per rank, in any
  // processes or hosts that see the directory): each member holds a shared flock on a
  // lock file in it while its Store lives (the kernel drops the lock of a process that
  // dies). The first member to find no other alive removes what earlier members left,
  // before writing anything; the last to go removes the directory, so no rank loses
  // the store while another still uses it (to form sub-groups, say). InvalidArgument
  // for an empty path; PermissionDenied or the system's error, naming the path, if it
  // cannot be created, written or locked.
  static absl::StatusOr<std::shared_ptr<Store>> File(const std::string& directory,
                                                     bool shared = false);

  // A store in this process's memory, for ranks that are threads of one process.
  static std::shared_ptr<Store> Hash();

  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Sets `key` (visible to every rank once this returns). Errors from the store.
  absl::Status Set(const std::string& key, absl::Span<const char> value);

  // The value of `key`, waiting up to `timeout` for some rank to set it;
  // DeadlineExceeded naming the key otherwise.
  absl::StatusOr<std::vector<char>> Get(const std::string& key, absl::Duration timeout);

  // "file store at /path" or "hash store".
  const std::string& description() const { return description_; }

  // The Gloo store itself, for backends.
  gloo::rendezvous::Store& gloo_store() { return *store_; }

 private:
  Store(std::unique_ptr<gloo::rendezvous::Store> store, std::string description,
        std::string directory, int lock_fd);

  // Takes a member's shared lock on `directory`'s lock file (clearing what no live
  // member holds first); the file descriptor that holds it.
  static absl::StatusOr<int> JoinMembers(const std::string& directory);

  std::unique_ptr<gloo::rendezvous::Store> store_;
  std::string description_;
  std::string directory_;  // Of a file store; "" for a hash store.
  int lock_fd_ = -1;       // A shared store's member lock; -1 otherwise.
};

}  // namespace genesis::distributed

#endif  // GENESIS_DISTRIBUTED_STORE_H_
