// Whether a communicator is still usable, and why not: the first failure wins and every
// later call reports it.
#ifndef GENESIS_DISTRIBUTED_INTERNAL_GROUP_HEALTH_H_
#define GENESIS_DISTRIBUTED_INTERNAL_GROUP_HEALTH_H_

#include <atomic>
#include <mutex>
#include <string>

#include "absl/status/status.h"

namespace genesis::distributed::internal {

class GroupHealth {
 public:
  explicit GroupHealth(std::string group) : group_(std::move(group)) {}

  // OK while usable; FailedPrecondition naming the group and the first failure after.
  absl::Status Check() const;
  // The first failure, unchanged (OK while usable).
  absl::Status cause() const;
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  // Records `why` if it is the first failure; returns true if it was.
  bool Fail(const absl::Status& why);

 private:
  const std::string group_;
  std::atomic<bool> failed_{false};
  mutable std::mutex mu_;
  absl::Status cause_;
};

}  // namespace genesis::distributed::internal

#endif  // GENESIS_DISTRIBUTED_INTERNAL_GROUP_HEALTH_H_
