// Planning buckets for collectives of many storages (gradients): which storages share
// one collective, and (PackedCollectives) which packed buckets go in one collective.
//
// PyTorch's DDP packs gradients into buckets of 25 MiB (its users find that small for
// large models, so here it is a setting) and runs one all_reduce per bucket. The plan
// keeps the storages' order (the order gradients become ready in); a bucket holds
// consecutive storages of one dtype, device and stream, up to `bucket_bytes` (a storage
// larger than that gets a bucket of its own). A bucket whose storages lie back to back
// in one buffer, as gradients kept as views of one flat buffer do, is `in_place`: its
// collective runs on that memory and nothing is copied. Otherwise the storages are
// packed into one buffer at offsets aligned to kPackAlignment, so that the fused copy
// kernel moves them with 16-byte loads and stores whatever their sizes.
//
// A tapered tail (`last_bucket_bytes`) is for buckets reduced while backward runs
// (reducer.h): the last bucket's collective cannot start before backward's last
// gradient, so whatever it holds is exposed. The last bucket is limited to
// last_bucket_bytes, the one before it to `taper` times that, and so on up to
// bucket_bytes; each of them is then reduced in less time than backward takes to
// produce the smaller one after it, wherever the collectives run at least `taper`
// times as fast as backward produces gradients.
#ifndef GENESIS_DISTRIBUTED_BUCKET_PLAN_H_
#define GENESIS_DISTRIBUTED_BUCKET_PLAN_H_

#include <cstddef>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "genesis/core/dtype.h"
#include "genesis/storage/storage.h"

namespace genesis::distributed {

struct BucketOptions {
  // The most bytes of one bucket; at least 1.
  size_t bucket_bytes = size_t{25} << 20;
  // The first bucket's limit (DDP uses 1 MiB, so that communication starts early);
  // 0: the same as bucket_bytes.
  size_t first_bucket_bytes = 0;
  // The last bucket's limit, with the buckets before it growing by `taper` each up to
  // bucket_bytes (planned from the end); 0: no taper. The buckets before the tail are
  // planned as without it, first_bucket_bytes included.
  size_t last_bucket_bytes = 0;
  // How much larger each bucket of the tail may be than the one after it; at least 2.
  // (2 left the least exposed in reducer_benchmark on H200s: docs/distributed.md.)
  size_t taper = 2;
};

// Where packed storages start in their bucket's buffer: a multiple of this many bytes.
inline constexpr size_t kPackAlignment = 16;

struct Bucket {
  // Indices of the bucket's storages, ascending.
  std::vector<size_t> members;
  // Byte offset of each member in the bucket's memory (in_place: back to back;
  // packed: aligned to kPackAlignment, the bytes between them unused).
  std::vector<size_t> offsets;
  DType dtype = DType::kFloat32;
  // The bucket's memory: the members' bytes, plus the gaps when packed (a whole number
  // of elements).
  size_t bytes = 0;
  // The members are back to back in one buffer: no packing.
  bool in_place = false;
};

// Buckets for `storages`, in order. InvalidArgument (naming the index) for an undefined
// or non-contiguous storage, a bucket_bytes of 0, or a taper below 2 with a tail.
absl::StatusOr<std::vector<Bucket>> PlanBuckets(absl::Span<const storage::Storage> storages,
                                                const BucketOptions& options = {});

// Packed buckets that follow each other (BucketedAllReduce) are packed one after another
// into one buffer and reduced by fewer, larger collectives than one per bucket: each
// collective pays NCCL's start and ramp (four all_reduces of 25 MiB took 1.2 times one of
// 100 MiB on two H200s). The first and the last bucket go alone, since packing the first
// and unpacking the last are exposed; from the front each collective holds up to
// `growth` times the bytes of the one before it (its buckets are packed while that one
// runs), from the back up to `growth` times the bytes of the one after it (they are
// unpacked while that one runs), and at least one bucket. Packing and unpacking move
// bytes about four times as fast as all_reduce on two H200s (docs/distributed.md,
// "Bucketed all_reduce"), faster against it on more ranks, hence the default.
inline constexpr size_t kPackedCollectiveGrowth = 4;

// How many of the consecutive packed buckets whose sizes are `bytes` each collective
// reduces, in order (the counts add up to bytes.size()). The same for the same sizes
// on every rank. A `growth` of 0 counts as 1.
std::vector<size_t> PackedCollectives(absl::Span<const size_t> bytes,
                                      size_t growth = kPackedCollectiveGrowth);

}  // namespace genesis::distributed

#endif  // GENESIS_DISTRIBUTED_BUCKET_PLAN_H_
