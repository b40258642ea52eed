#include "genesis/transfer/adjacent_runs.h"

#include <cstddef>

namespace genesis::transfer {

AdjacentRuns FindAdjacentRuns(absl::Span<const CopyRequest> requests,
                              absl::Span<const size_t> indices, size_t min_bytes) {
  AdjacentRuns runs;
  if (indices.empty()) return runs;
  const CopyRequest* first = &requests[indices[0]];
  AdjacentRun run{0, 1, first->bytes};
  const char* src_end = static_cast<const char*>(first->src) + first->bytes;
  const char* dst_end = static_cast<const char*>(first->dst) + first->bytes;
  for (size_t k = 1; k < indices.size(); ++k) {
    const CopyRequest& r = requests[indices[k]];
    if (r.src != src_end || r.dst != dst_end) {
      if (run.bytes >= min_bytes) runs.push_back(run);
      run = AdjacentRun{k, k, 0};
    }
    run.end = k + 1;
    run.bytes += r.bytes;
    src_end = static_cast<const char*>(r.src) + r.bytes;
    dst_end = static_cast<const char*>(r.dst) + r.bytes;
  }
  if (run.bytes >= min_bytes) runs.push_back(run);
  return runs;
}

}  // namespace genesis::transfer
