#include "genesis/distributed/nccl/bootstrap_id.h"

#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace genesis::distributed::nccl_backend {

absl::StatusOr<std::vector<char>> WithBootstrapMagic(std::vector<char> id, uint64_t magic) {
  if (id.size() != 128) {
    return absl::InvalidArgumentError(
        absl::StrCat("an NCCL unique id has 128 bytes, not ", id.size()));
  }
  if (magic == 0) return absl::InvalidArgumentError("a bootstrap magic of 0");
  uint64_t current = 0;
  std::memcpy(&current, id.data(), sizeof(current));
  if (current != kNcclFixedMagic) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the NCCL unique id does not start with NCCL's fixed bootstrap magic (0x",
        absl::Hex(current, absl::kZeroPad16), "): not made with NCCL_COMM_ID, or by an NCCL "
        "whose id layout is unknown"));
  }
  std::memcpy(id.data(), &magic, sizeof(magic));
  return id;
}

}  // namespace genesis::distributed::nccl_backend
