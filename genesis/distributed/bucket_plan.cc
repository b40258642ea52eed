#include "genesis/distributed/bucket_plan.h"

#include <algorithm>
#include <limits>
#include <utility>

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

// Whether `s` may join a bucket of `bytes` so far, limited to `limit`, beside its member
// `neighbour`.
bool Joins(const Storage& neighbour, const Storage& s, size_t bytes, size_t limit) {
  return SameBucketKind(neighbour, s) && bytes + s.nbytes() <= limit;
}

// The tapered tail of `storages` (BucketOptions::last_bucket_bytes), planned from the
// end: its buckets in order, and where the tail begins.
std::pair<std::vector<Bucket>, size_t> PlanTail(absl::Span<const Storage> storages,
                                                const BucketOptions& options) {
  std::vector<Bucket> tail;  // The last bucket first, until the end.
  size_t begin = storages.size();
  size_t limit = std::min(options.last_bucket_bytes, options.bucket_bytes);
  while (options.last_bucket_bytes > 0 && begin > 0 && limit < options.bucket_bytes) {
    const size_t end = begin--;
    Bucket b{{}, {}, storages[begin].dtype(), storages[begin].nbytes(), /*in_place=*/true};
    while (begin > 0 && Joins(storages[begin], storages[begin - 1], b.bytes, limit)) {
      b.in_place = b.in_place && Adjacent(storages[begin - 1], storages[begin]);
      b.bytes += storages[--begin].nbytes();
    }
    for (size_t i = begin; i < end; ++i) b.members.push_back(i);
    tail.push_back(std::move(b));
    limit = limit > options.bucket_bytes / options.taper ? options.bucket_bytes
                                                         : limit * options.taper;
  }
  std::reverse(tail.begin(), tail.end());
  return {std::move(tail), begin};
}

}  // namespace

absl::StatusOr<std::vector<Bucket>> PlanBuckets(absl::Span<const Storage> storages,
                                                const BucketOptions& options) {
  if (options.bucket_bytes == 0) {
    return absl::InvalidArgumentError("bucket_bytes is 0");
  }
  if (options.last_bucket_bytes > 0 && options.taper < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "taper is ", options.taper, ": a tail's buckets must grow, by 2 or more each"));
  }
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
  }
  auto [tail, tail_begin] = PlanTail(storages, options);
  std::vector<Bucket> buckets;
  for (size_t i = 0; i < tail_begin; ++i) {
    const Storage& s = storages[i];
    // The limit of the open bucket: the first one may be smaller.
    const size_t limit = buckets.size() == 1 && options.first_bucket_bytes > 0
                             ? options.first_bucket_bytes
                             : options.bucket_bytes;
    if (!buckets.empty() && Joins(storages[buckets.back().members.back()], s,
                                  buckets.back().bytes, limit)) {
      Bucket& b = buckets.back();
      b.in_place = b.in_place && Adjacent(storages[b.members.back()], s);
      b.members.push_back(i);
      b.bytes += s.nbytes();
    } else {
      buckets.push_back(Bucket{{i}, {}, s.dtype(), s.nbytes(), /*in_place=*/true});
    }
  }
  for (Bucket& b : tail) buckets.push_back(std::move(b));
  for (Bucket& b : buckets) LayOut(b, storages);
  return buckets;
}

std::vector<size_t> PackedCollectives(absl::Span<const size_t> bytes, size_t growth) {
  const size_t m = bytes.size();
  if (m <= 2) return std::vector<size_t>(m, 1);
  growth = std::max<size_t>(growth, 1);
  // `growth` times `b`, at most the largest size_t.
  const auto grown = [&](size_t b) {
    return b > std::numeric_limits<size_t>::max() / growth ? std::numeric_limits<size_t>::max()
                                                           : b * growth;
  };
  std::vector<size_t> front = {1};
  std::vector<size_t> back = {1};  // From the end.
  size_t front_bytes = bytes[0];   // The innermost collective's bytes on each side.
  size_t back_bytes = bytes[m - 1];
  size_t lo = 1;  // Buckets [lo, hi) are in no collective yet.
  size_t hi = m - 1;
  // The side whose innermost collective is smaller takes the next, so that the two
  // meet in collectives of like sizes.
  while (lo < hi) {
    size_t sum = 0;
    size_t count = 0;
    if (front_bytes <= back_bytes) {
      const size_t limit = grown(front_bytes);
      do {
        sum += bytes[lo++];
        ++count;
      } while (lo < hi && bytes[lo] <= limit - std::min(limit, sum));
      front.push_back(count);
      front_bytes = sum;
    } else {
      const size_t limit = grown(back_bytes);
      do {
        sum += bytes[--hi];
        ++count;
      } while (lo < hi && bytes[hi - 1] <= limit - std::min(limit, sum));
      back.push_back(count);
      back_bytes = sum;
    }
  }
  front.insert(front.end(), back.rbegin(), back.rend());
  return front;
}

}  // namespace genesis::distributed
