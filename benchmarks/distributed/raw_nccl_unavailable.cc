#include "absl/status/status.h"
#include "benchmarks/distributed/raw_nccl.h"

namespace genesis::benchmarks {

absl::StatusOr<std::unique_ptr<RawNccl>> RawNccl::Create(int, int, int, absl::Span<const char>,
                                                         size_t, Memory, Comm) {
  return absl::FailedPreconditionError("this build has no NCCL");
}

}  // namespace genesis::benchmarks
