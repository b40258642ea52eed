#include "genesis/distributed/communicator.h"

#include "absl/strings/str_cat.h"

namespace genesis::distributed {

std::string GroupInfo::Describe() const {
  return absl::StrCat(backend, " group '", name, "' (rank ", rank, " of ", size, ")");
}

}  // namespace genesis::distributed
