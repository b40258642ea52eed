#include "genesis/distributed/bucket_plan.h"

#include "absl/strings/str_cat.h"

namespace genesis::distributed {

using storage::Storage;

namespace {

bool SameBucketKind(const Storage& a, const Storage& b) {
  return a.dtype() == b.dtype() && a.device() == b.device() && a.stream() == b.stream();
}

// Lays out `b`'s members (their sizes are `bytes`): back to back when in place,
// aligned to kPackAlignment otherwise.
void LayOut(Bucket& b, absl::Span<const Storage> storages) {
  const size_t align = b.in_place ? 1 : kPackAlignment;
  size_t at = 0;
  b.offsets.clear();
  for (size_t index : b.members) {
    at = (at + align - 1) / align * align;
    b.offsets.push_back(at);
    at += storages[index].nbytes();
  }
  b.bytes = at;  // Every member ends on a whole element, so the total does too.
}

// `next` starts where `previous` ends, in the same memory.
bool Adjacent(const Storage& previous, const Storage& next) {
  return previous.SharesMemoryWith(next) &&
         static_cast<const char*>(previous.data_ptr()) + previous.nbytes() == next.data_ptr();
}

}  // namespace

absl::StatusOr<std::vector<Bucket>> PlanBuckets(absl::Span<const Storage> storages,
                                                const BucketOptions& options) {
  if (options.bucket_bytes == 0) {
    return absl::InvalidArgumentError("bucket_bytes is 0");
  }
  std::vector<Bucket> buckets;
  for (size_t i = 0; i < storages.size(); ++i) {
    const Storage& s = storages[i];
    if (!s.defined()) {
      return absl::InvalidArgumentError(absl::StrCat("storage ", i, " is undefined"));
    }
    if (!s.is_contiguous()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "storage ", i, " (", s.ToString(), ") is not contiguous: buckets take contiguous "
          "storages (call Contiguous() first)"));
    }
    // The limit of the open bucket: the first one may be smaller.
    const size_t limit = buckets.size() == 1 && options.first_bucket_bytes > 0
                             ? options.first_bucket_bytes
                             : options.bucket_bytes;
    const bool joins = !buckets.empty() &&
                       SameBucketKind(storages[buckets.back().members.back()], s) &&
                       buckets.back().bytes + s.nbytes() <= limit;
    if (joins) {
      Bucket& b = buckets.back();
      b.in_place = b.in_place && Adjacent(storages[b.members.back()], s);
      b.members.push_back(i);
      b.bytes += s.nbytes();
    } else {
      buckets.push_back(Bucket{{i}, {}, s.dtype(), s.nbytes(), /*in_place=*/true});
    }
  }
  for (Bucket& b : buckets) LayOut(b, storages);
  return buckets;
}

}  // namespace genesis::distributed
