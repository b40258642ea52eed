// Runs of copies that continue one another on both sides: each starts, on its source
// and on its destination, where the one before it ends. Such a run moves as one copy.
//
// The batch copier hands runs of peer copies that are large together to the copy
// engine whole: over NVLink between two H100s one 64 MiB cudaMemcpyPeerAsync moves
// 383 GB/s, while a kernel copying the same bytes as 1,024 pieces of 64 KiB tops out
// at about 357 GB/s whatever its shape (pulling or pushing, 128 to 1,024 threads, tiles
// of 16 to 64 KiB). Plain C++, tested on any machine.
#ifndef GENESIS_TRANSFER_ADJACENT_RUNS_H_
#define GENESIS_TRANSFER_ADJACENT_RUNS_H_

#include <cstddef>

#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"
#include "genesis/transfer/batch_plan.h"

namespace genesis::transfer {

// Positions [begin, end) of a list of request indices, and the bytes of those requests.
struct AdjacentRun {
  size_t begin = 0;
  size_t end = 0;
  size_t bytes = 0;
  friend bool operator==(const AdjacentRun&, const AdjacentRun&) = default;
};

using AdjacentRuns = absl::InlinedVector<AdjacentRun, 4>;

// Cuts the requests named by `indices`, in that order, into maximal runs in which each
// request's source and destination begin where the previous request's end, and
// returns, in order, the runs of at least `min_bytes` (with 0, every run: then each
// position of `indices` is in exactly one). One pass; nothing is allocated unless more
// than four runs qualify. Indices must be valid positions of `requests`. Devices are
// not compared: the caller passes requests of one source device and one destination
// device (a CopyGroup's).
AdjacentRuns FindAdjacentRuns(absl::Span<const CopyRequest> requests,
                              absl::Span<const size_t> indices, size_t min_bytes = 0);

}  // namespace genesis::transfer

#endif  // GENESIS_TRANSFER_ADJACENT_RUNS_H_
