#include "genesis/transfer/batch_plan.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "genesis/core/absl_compat.h"
#include "genesis/core/byte_size.h"
#include "genesis/core/status.h"

namespace genesis::transfer {
namespace {

// Why a copy got its mechanism; one group per (direction, devices, rule). Declared in
// the order of Mechanism, so that groups sort by mechanism.
enum class Rule {
  kHostToHost,       // kHostMemcpy
  kFusedPinned,      // kFusedKernel: small, pinned host side, enough of them.
  kFusedDevice,      // kFusedKernel: small device-to-device, enough of them.
  kLarge,            // kCopyEngine: at least copy_engine_min_bytes.
  kNotBatched,       // kCopyEngine: neither fused, large nor staged, and not batched.
  kBatched,          // kBatchMemcpy
  kPeerLarge,        // kPeerCopy: above fused_max_bytes.
  kPeerFewSmall,     // kPeerCopy: small, but too few to fuse.
  kPeerFused,        // kPeerFusedKernel
  kNoPeerAccess,     // kStagedPeer
  kPageableStaging,  // kPageableStaging
};

Mechanism MechanismOf(Rule rule) {
  switch (rule) {
    case Rule::kHostToHost:
      return Mechanism::kHostMemcpy;
    case Rule::kFusedPinned:
    case Rule::kFusedDevice:
      return Mechanism::kFusedKernel;
    case Rule::kLarge:
    case Rule::kNotBatched:
      return Mechanism::kCopyEngine;
    case Rule::kBatched:
      return Mechanism::kBatchMemcpy;
    case Rule::kPeerLarge:
    case Rule::kPeerFewSmall:
      return Mechanism::kPeerCopy;
    case Rule::kPeerFused:
      return Mechanism::kPeerFusedKernel;
    case Rule::kNoPeerAccess:
      return Mechanism::kStagedPeer;
    case Rule::kPageableStaging:
      return Mechanism::kPageableStaging;
  }
  return Mechanism::kCopyEngine;
}

// Devices in a total order: the CPU, then cuda:0, cuda:1, ...
int DeviceKey(Device device) { return device.is_cpu() ? -1 : device.index(); }

std::string Describe(size_t index, const CopyRequest& r) {
  return absl::StrCat("request ", index, " (", r.src_device.ToString(), " -> ",
                      r.dst_device.ToString(), ", ", r.bytes, " bytes)");
}

std::string Range(uintptr_t begin, size_t bytes) {
  return absl::StrFormat("[%#x, %#x)", begin, begin + bytes);
}

absl::Status Invalid(size_t index, const CopyRequest& r, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(Describe(index, r), ": ", ToAbsl(what)));
}

absl::Status CheckTopology(const Topology& topology) {
  if (topology.device_count < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "topology: device_count is ", topology.device_count, ", must be at least 0"));
  }
  const auto n = static_cast<size_t>(topology.device_count);
  if (topology.peer_access.empty()) return absl::OkStatus();
  if (topology.peer_access.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("topology: peer_access has ", topology.peer_access.size(),
                     " rows for ", n, " devices (must be empty or ", n, " x ", n, ")"));
  }
  for (size_t i = 0; i < n; ++i) {
    if (topology.peer_access[i].size() != n) {
      return absl::InvalidArgumentError(
          absl::StrCat("topology: peer_access row ", i, " has ",
                       topology.peer_access[i].size(), " entries for ", n, " devices"));
    }
  }
  return absl::OkStatus();
}

bool CanAccess(const Topology& topology, int from, int to) {
  return !topology.peer_access.empty() && topology.peer_access[from][to];
}

absl::Status CheckRequest(size_t index, const CopyRequest& r, const Topology& topology) {
  for (const auto& [device, side] :
       {std::pair{r.src_device, "source"}, std::pair{r.dst_device, "destination"}}) {
    if (device.is_cuda() && device.index() >= topology.device_count) {
      return Invalid(index, r,
                     absl::StrCat(side, " device ", device.ToString(),
                                  " is out of range: the topology has ",
                                  topology.device_count, " CUDA devices"));
    }
  }
  if (r.bytes == 0) return absl::OkStatus();
  if (r.src == nullptr) return Invalid(index, r, "the source pointer is null");
  if (r.dst == nullptr) return Invalid(index, r, "the destination pointer is null");
  const auto s = reinterpret_cast<uintptr_t>(r.src);
  const auto d = reinterpret_cast<uintptr_t>(r.dst);
  if (r.bytes > UINTPTR_MAX - s || r.bytes > UINTPTR_MAX - d) {
    return Invalid(index, r,
                   absl::StrFormat("a range wraps around the address space (source "
                                   "%#x, destination %#x)",
                                   s, d));
  }
  if (r.src_device == r.dst_device && s < d + r.bytes && d < s + r.bytes) {
    return Invalid(
        index, r,
        absl::StrCat("source ", Range(s, r.bytes), " and destination ", Range(d, r.bytes),
                     " overlap on ", r.dst_device.ToString()));
  }
  return absl::OkStatus();
}

struct Interval {
  int device;  // DeviceKey
  uintptr_t begin;
  uintptr_t end;
  size_t request;
};

// Destinations must not overlap any other request's destination or source.
absl::Status CheckOverlaps(absl::Span<const CopyRequest> requests) {
  std::vector<Interval> dsts;
  dsts.reserve(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    const CopyRequest& r = requests[i];
    if (r.bytes == 0) continue;
    const auto d = reinterpret_cast<uintptr_t>(r.dst);
    dsts.push_back({DeviceKey(r.dst_device), d, d + r.bytes, i});
  }
  const auto by_start = [](const Interval& a, const Interval& b) {
    return std::tie(a.device, a.begin, a.request) <
           std::tie(b.device, b.begin, b.request);
  };
  // Batches are usually laid out in order already: then the check is linear.
  if (!std::is_sorted(dsts.begin(), dsts.end(), by_start)) {
    std::sort(dsts.begin(), dsts.end(), by_start);
  }
  // Sorted by start, an interval overlaps an earlier one if and only if it starts
  // before the furthest end seen so far on its device.
  for (size_t i = 1, furthest = 0; i < dsts.size(); ++i) {
    if (dsts[i].device != dsts[furthest].device) {
      furthest = i;
      continue;
    }
    if (dsts[i].begin < dsts[furthest].end) {
      const Interval& a = dsts[furthest];
      const Interval& b = dsts[i];
      const size_t later = std::max(a.request, b.request);
      const size_t earlier = std::min(a.request, b.request);
      const CopyRequest& rl = requests[later];
      const CopyRequest& re = requests[earlier];
      return Invalid(
          later, rl,
          absl::StrCat("destination ",
                       Range(reinterpret_cast<uintptr_t>(rl.dst), rl.bytes), " on ",
                       rl.dst_device.ToString(), " overlaps the destination ",
                       Range(reinterpret_cast<uintptr_t>(re.dst), re.bytes), " of ",
                       Describe(earlier, re)));
    }
    if (dsts[i].end > dsts[furthest].end) furthest = i;
  }
  // The destinations are now known to be disjoint, so sorted by start they are sorted
  // by end too: the first one on a device ending after a source's start is the only
  // candidate to overlap it. Sorted the same way, the sources meet their candidates in
  // order, so one sweep finds them all; the error names the first request (in batch
  // order) whose source is overlapped.
  std::vector<Interval> srcs;
  srcs.reserve(dsts.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    const CopyRequest& r = requests[i];
    if (r.bytes == 0) continue;
    const auto s = reinterpret_cast<uintptr_t>(r.src);
    srcs.push_back({DeviceKey(r.src_device), s, s + r.bytes, i});
  }
  if (!std::is_sorted(srcs.begin(), srcs.end(), by_start)) {
    std::sort(srcs.begin(), srcs.end(), by_start);
  }
  size_t first = SIZE_MAX;  // The first overlapped source's request,
  size_t writer = 0;        // and the destination that overlaps it.
  size_t candidate = 0;
  for (const Interval& src : srcs) {
    while (candidate < dsts.size() &&
           std::tie(dsts[candidate].device, dsts[candidate].end) <=
               std::tie(src.device, src.begin)) {
      ++candidate;
    }
    if (candidate == dsts.size()) break;
    const Interval& dst = dsts[candidate];
    // Not the request's own destination: CheckRequest rejected that.
    if (dst.device == src.device && dst.begin < src.end && src.request < first) {
      first = src.request;
      writer = dst.request;
    }
  }
  if (first != SIZE_MAX) {
    const CopyRequest& r = requests[first];
    const CopyRequest& w = requests[writer];
    return Invalid(
        writer, w,
        absl::StrCat("destination ", Range(reinterpret_cast<uintptr_t>(w.dst), w.bytes),
                     " on ", w.dst_device.ToString(), " overlaps the source ",
                     Range(reinterpret_cast<uintptr_t>(r.src), r.bytes), " of ",
                     Describe(first, r)));
  }
  return absl::OkStatus();
}

// The old checks, for batches the fast pass below cannot clear: every request's own
// checks in order, then the overlaps. They produce every error message.
absl::Status CheckAll(absl::Span<const CopyRequest> requests, const Topology& topology) {
  for (size_t i = 0; i < requests.size(); ++i) {
    GENESIS_RETURN_IF_ERROR(CheckRequest(i, requests[i], topology));
  }
  return CheckOverlaps(requests);
}

Direction DirectionOf(const CopyRequest& r) {
  if (r.src_device.is_cpu()) {
    return r.dst_device.is_cpu() ? Direction::kHostToHost : Direction::kHostToDevice;
  }
  if (r.dst_device.is_cpu()) return Direction::kDeviceToHost;
  return r.src_device == r.dst_device ? Direction::kDeviceToDevice : Direction::kPeer;
}

struct GroupKey {
  Direction direction;
  int src;
  int dst;
  friend bool operator<(const GroupKey& a, const GroupKey& b) {
    return std::tie(a.direction, a.src, a.dst) < std::tie(b.direction, b.src, b.dst);
  }
  friend bool operator==(const GroupKey&, const GroupKey&) = default;
};

std::string Bytes(size_t n) { return FormatByteSize(n); }

std::string ReasonFor(Rule rule, size_t n, const CopyRequest& first,
                      const Topology& topology, const PlanOptions& o, size_t small_count,
                      size_t batchable_count) {
  switch (rule) {
    case Rule::kHostToHost:
      return "host to host: memcpy";
    case Rule::kFusedPinned:
    case Rule::kFusedDevice:
    case Rule::kPeerFused:
      return absl::StrCat(rule == Rule::kFusedPinned ? "pinned host memory, " : "",
                          rule == Rule::kPeerFused ? "peer access, " : "", n,
                          rule == Rule::kFusedDevice ? " copies <= fused_device_max_bytes ("
                                                     : " copies <= fused_max_bytes (",
                          Bytes(rule == Rule::kFusedDevice ? o.fused_device_max_bytes
                                                           : o.fused_max_bytes),
                          "), at least fused_min_count (", o.fused_min_count, ")");
    case Rule::kLarge:
      return absl::StrCat("each >= copy_engine_min_bytes (",
                          Bytes(o.copy_engine_min_bytes), ")");
    case Rule::kNotBatched:
      if (!topology.batch_memcpy_available) {
        return absl::StrCat("< copy_engine_min_bytes (", Bytes(o.copy_engine_min_bytes),
                            ") and not fused; batch memcpy unavailable");
      }
      return absl::StrCat("< copy_engine_min_bytes (", Bytes(o.copy_engine_min_bytes),
                          ") and not fused; only ", batchable_count,
                          " such copies, below batch_min_count (", o.batch_min_count,
                          ")");
    case Rule::kBatched:
      return absl::StrCat(n, " copies < copy_engine_min_bytes (",
                          Bytes(o.copy_engine_min_bytes),
                          ") and not fused, at least batch_min_count (",
                          o.batch_min_count, "); batch memcpy available");
    case Rule::kPeerLarge:
      return absl::StrCat("peer access; each > fused_max_bytes (",
                          Bytes(o.fused_max_bytes), ")");
    case Rule::kPeerFewSmall:
      return absl::StrCat("peer access; only ", small_count,
                          " copies <= fused_max_bytes (", Bytes(o.fused_max_bytes),
                          "), below fused_min_count (", o.fused_min_count, ")");
    case Rule::kNoPeerAccess:
      return absl::StrCat("no peer access between ", first.src_device.ToString(), " and ",
                          first.dst_device.ToString(),
                          ": staged through pinned host memory");
    case Rule::kPageableStaging:
      return absl::StrCat("pageable host memory, each >= pageable_staging_min_bytes (",
                          Bytes(o.pageable_staging_min_bytes), ")");
  }
  return "";
}

// What a copy is, before its group's counts decide its rule.
enum class Kind : uint8_t {
  kSmall,   // Small enough to fuse (and its host side, if any, pinned).
  kStaged,  // Pageable host side, large enough for the staging pipeline.
  kLarge,   // At least copy_engine_min_bytes (between devices: above fused_max_bytes).
  kOther,   // None of these: batch memcpy or the copy engine.
};
constexpr int kKinds = 4;

// The sizes that make a copy of one direction (and pinning) small, staged or large,
// tested in that order. A bound that does not apply is 0 for small_max and SIZE_MAX
// for the others: no valid copy has SIZE_MAX bytes (its range would wrap).
struct KindBounds {
  size_t small_max = 0;
  size_t staged_min = SIZE_MAX;
  size_t large_min = SIZE_MAX;
};

KindBounds BoundsFor(Direction direction, bool src_pinned, bool dst_pinned,
                     const PlanOptions& o) {
  KindBounds bounds;
  switch (direction) {
    case Direction::kHostToHost:
      return bounds;  // Every copy is kOther (host memcpy).
    case Direction::kPeer:
      bounds.small_max = o.fused_max_bytes;
      bounds.large_min = 0;
      return bounds;
    case Direction::kDeviceToDevice:
      bounds.small_max = o.fused_device_max_bytes;
      break;
    case Direction::kHostToDevice:
    case Direction::kDeviceToHost:
      if (direction == Direction::kHostToDevice ? src_pinned : dst_pinned) {
        bounds.small_max = o.fused_max_bytes;
      } else {
        bounds.staged_min = o.pageable_staging_min_bytes;
      }
      break;
  }
  bounds.large_min = o.copy_engine_min_bytes;
  return bounds;
}

int KindOf(size_t bytes, const KindBounds& b) {
  const Kind kind = bytes <= b.small_max   ? Kind::kSmall
                    : bytes >= b.staged_min ? Kind::kStaged
                    : bytes >= b.large_min  ? Kind::kLarge
                                            : Kind::kOther;
  return static_cast<int>(kind);
}

// The copies of one (direction, devices) group of the batch.
struct Bucket {
  GroupKey key;
  size_t first = 0;           // Its first request (maybe one of no bytes).
  size_t count[kKinds] = {};  // Copies of each kind.
  size_t bytes[kKinds] = {};  // Their bytes.
  int group_of_kind[kKinds] = {-1, -1, -1, -1};  // In BatchPlan::groups.
};

// Devices whose ranges the scan tracks: the CPU and cuda:0 .. cuda:14. The others
// share one more slot, and batches that use them get the full overlap check.
constexpr int kTrackedDevices = 16;

// The ranges the scan has seen on one device.
struct DeviceSpan {
  uintptr_t last_dst_end = 0;                  // Of the last destination so far.
  uintptr_t dst_lo = UINTPTR_MAX, dst_hi = 0;  // Span of the destinations.
  uintptr_t src_lo = UINTPTR_MAX, src_hi = 0;  // Span of the sources.
};

int SlotOf(Device device) {
  const int slot = device.is_cpu() ? 0 : device.index() + 1;
  return slot < kTrackedDevices ? slot : kTrackedDevices;
}

// Consecutive requests of the same devices and pinning (of their host sides).
struct Run {
  size_t begin = 0;
  size_t end = 0;
  uint32_t context = 0;    // In Scan::contexts.
  int kind = -1;           // Of all its copies, or -1 if they are of several kinds.
  bool has_empty = false;  // Some request has no bytes.
};

// A side of a request (device, and pinning if it is the host's) as one word: a run's
// devices and pinning as two, to find the run's context.
inline uint64_t SideKey(Device device, bool pinned) {
  return static_cast<uint64_t>(static_cast<uint32_t>(device.index())) |
         static_cast<uint64_t>(device.type()) << 32 |
         static_cast<uint64_t>(pinned && device.is_cpu()) << 40;
}

struct RunKey {
  uint64_t src;
  uint64_t dst;
  friend bool operator==(const RunKey&, const RunKey&) = default;
};

inline RunKey KeyOf(const CopyRequest& r) {
  return {SideKey(r.src_device, r.src_pinned), SideKey(r.dst_device, r.dst_pinned)};
}

// What the runs of one set of devices and pinning share.
struct RunContext {
  RunKey key;  // The devices and pinning.
  size_t bucket;
  KindBounds bounds;
  int src_slot;
  int dst_slot;
};

// What one pass over a batch finds.
struct Scan {
  absl::InlinedVector<Bucket, 4> buckets;  // One per (direction, devices).
  absl::InlinedVector<RunContext, 4> contexts;
  absl::InlinedVector<Run, 4> runs;  // In request order, covering the batch.
  // Proven: every request passes CheckRequest's checks and no destination overlaps
  // another request's destination or source. If false, CheckAll decides.
  bool valid = true;
};

// The context of runs like `head` (request `index`): checks its devices (setting
// `bad` if one is out of range) and finds or makes its bucket.
RunContext MakeContext(const CopyRequest& head, size_t index, const Topology& topology,
                       const PlanOptions& options, Scan& scan, bool& bad) {
  bad |= (head.src_device.is_cuda() && head.src_device.index() >= topology.device_count) ||
         (head.dst_device.is_cuda() && head.dst_device.index() >= topology.device_count);
  const GroupKey key{DirectionOf(head), DeviceKey(head.src_device),
                     DeviceKey(head.dst_device)};
  size_t bucket = 0;
  while (bucket < scan.buckets.size() && !(scan.buckets[bucket].key == key)) ++bucket;
  if (bucket == scan.buckets.size()) scan.buckets.push_back({.key = key, .first = index});
  const RunKey run_key = KeyOf(head);
  return {.key = run_key,
          .bucket = bucket,
          .bounds = BoundsFor(key.direction, head.src_pinned, head.dst_pinned, options),
          .src_slot = SlotOf(head.src_device),
          .dst_slot = SlotOf(head.dst_device)};
}

// What the copies of one run add up to (SumRun below).
struct RunSums {
  size_t sum = 0;
  size_t empty = 0;
  size_t min_bytes = SIZE_MAX;
  size_t max_bytes = 0;
  uintptr_t last_dst_end;  // In: the device's last destination end so far.
  uintptr_t first_dst = UINTPTR_MAX;  // The run's first destination.
  uintptr_t src_lo;  // In and out: the source device's span.
  uintptr_t src_hi;
  // Not proven: that no range wraps and each destination begins at or after the
  // previous one's end.
  bool fail = false;
};

// Where the run of requests like requests[begin] ends: the same devices, and the same
// pinning of a host side (kSrcHost, kDstHost; a device side's is ignored, as PlanBatch
// ignores it). A compare and a branch per field: the branches go one way until the run
// ends.
template <bool kSrcHost, bool kDstHost>
[[gnu::noinline]] size_t RunEndOf(const CopyRequest* requests, size_t begin, size_t n) {
  const CopyRequest& head = requests[begin];
  const Device src = head.src_device;
  const Device dst = head.dst_device;
  const bool src_pinned = head.src_pinned;
  const bool dst_pinned = head.dst_pinned;
  size_t j = begin + 1;
  for (; j < n; ++j) {
    const CopyRequest& r = requests[j];
    if (!(r.src_device == src && r.dst_device == dst &&
          (!kSrcHost || r.src_pinned == src_pinned) &&
          (!kDstHost || r.dst_pinned == dst_pinned))) [[unlikely]] {
      break;
    }
  }
  return j;
}

size_t RunEnd(const CopyRequest* requests, size_t begin, size_t n) {
  const bool src_host = requests[begin].src_device.is_cpu();
  const bool dst_host = requests[begin].dst_device.is_cpu();
  if (src_host) {
    return dst_host ? RunEndOf<true, true>(requests, begin, n)
                    : RunEndOf<true, false>(requests, begin, n);
  }
  return dst_host ? RunEndOf<false, true>(requests, begin, n)
                  : RunEndOf<false, false>(requests, begin, n);
}

// Addresses, sizes and their sums below 2^62: no range wraps, and a destination that
// begins before the previous one ends makes its difference (mod 2^64) above 2^63.
constexpr uint64_t kHighBits = uint64_t{3} << 62;

// Sums the copies of the run [begin, end). Per copy only its addresses and size are
// read, and every sum stays in a register (a second pass over the run: the first,
// RunEnd, keeps the devices in registers instead). Not inlined: inside PlanBatch the
// compiler kept a sum in memory, which made the loop three times slower.
//
// Whether ranges wrap and destinations come in address order is read off one word:
// the OR of every address, size and (destination - previous destination end). With
// its two high bits clear, every address and size is below 2^62, so no range wraps,
// and each destination begins at or after the previous one's end (see kHighBits).
// Addresses that high (none on today's machines) only send the batch to the full
// checks.
[[gnu::noinline]] void SumRun(const CopyRequest* requests, size_t begin, size_t end,
                              RunSums& out) {
  uintptr_t last_end = out.last_dst_end;
  uintptr_t src_lo = out.src_lo;
  uintptr_t src_hi = out.src_hi;
  size_t sum = 0;
  size_t min_bytes = SIZE_MAX;
  size_t max_bytes = 0;
  size_t empty = 0;
  uint64_t bits = 0;
  for (size_t j = begin; j < end; ++j) {
    const CopyRequest& r = requests[j];
    const size_t b = r.bytes;
    if (b == 0) [[unlikely]] {
      ++empty;
      continue;
    }
    const auto s = reinterpret_cast<uintptr_t>(r.src);
    const auto d = reinterpret_cast<uintptr_t>(r.dst);
    bits |= s | d | b | (d - last_end);
    last_end = d + b;
    src_lo = std::min(src_lo, s);
    src_hi = std::max(src_hi, s + b);
    min_bytes = std::min(min_bytes, b);
    max_bytes = std::max(max_bytes, b);
    sum += b;
  }
  out.sum = sum;
  out.min_bytes = min_bytes;
  out.max_bytes = max_bytes;
  out.empty = empty;
  out.last_dst_end = last_end;
  // In address order the first destination is the lowest; out of order (`fail`) the
  // full checks decide anyway. A null one later in the run begins before the previous
  // end.
  out.first_dst = reinterpret_cast<uintptr_t>(requests[begin].dst);
  if (requests[begin].bytes == 0) [[unlikely]] {
    out.first_dst = UINTPTR_MAX;
    for (size_t j = begin; j < end; ++j) {
      if (requests[j].bytes != 0) {
        out.first_dst = reinterpret_cast<uintptr_t>(requests[j].dst);
        break;
      }
    }
  }
  out.src_lo = src_lo;
  out.src_hi = src_hi;
  out.fail = (bits & kHighBits) != 0;
}

// Whether every source lies wholly outside its device's destination span: a second look
// at the sources, for batches whose spans meet (separate buffers gathered into one that
// lies among them). With the destinations proven in address order and disjoint, such a
// source can overlap no destination.
bool SourcesOutsideDestinations(absl::Span<const CopyRequest> requests,
                                const DeviceSpan* spans) {
  for (const CopyRequest& r : requests) {
    if (r.bytes == 0) continue;
    const DeviceSpan& span = spans[SlotOf(r.src_device)];
    const auto s = reinterpret_cast<uintptr_t>(r.src);
    if (s < span.dst_hi && span.dst_lo < s + r.bytes) return false;
  }
  return true;
}

// One pass over `requests`, in runs (so that per copy only its addresses and size are
// looked at): the buckets, the runs and their kinds, and whether the batch is proven
// valid. The usual batch is: no null pointer or range that wraps, devices in the
// topology, and on each device the destinations come in address order without
// touching each other while the span of the sources and the span of the destinations
// do not meet (or, where they meet, no source lies within the destinations' span).
// Destinations that each begin at or after the previous one's end are disjoint, and
// with the spans apart no destination can overlap any source, its own included.
void ScanBatch(absl::Span<const CopyRequest> requests, const Topology& topology,
               const PlanOptions& options, Scan& scan) {
  const size_t n = requests.size();
  DeviceSpan spans[kTrackedDevices + 1];
  bool bad = false;
  if (n == 0) return;
  scan.contexts.push_back(MakeContext(requests[0], 0, topology, options, scan, bad));
  size_t context_index = 0;
  for (size_t i = 0; i < n;) {
    // A run starts: what is common to its copies, looked up (batches that alternate
    // between a few sets of devices have short runs) or made.
    const CopyRequest& head = requests[i];
    const RunKey key = KeyOf(head);
    if (!(scan.contexts[context_index].key == key)) {
      // From the next one on, so that batches that cycle find theirs at once.
      const size_t count = scan.contexts.size();
      size_t k = 1;
      while (k < count && !(scan.contexts[(context_index + k) % count].key == key)) ++k;
      if (k < count) {
        context_index = (context_index + k) % count;
      } else {
        context_index = count;
        scan.contexts.push_back(MakeContext(head, i, topology, options, scan, bad));
      }
    }
    const RunContext& context = scan.contexts[context_index];
    DeviceSpan& dst_span = spans[context.dst_slot];
    DeviceSpan& src_span = spans[context.src_slot];
    const size_t j = RunEnd(requests.data(), i, n);
    RunSums sums{.last_dst_end = dst_span.last_dst_end,
                 .src_lo = src_span.src_lo,
                 .src_hi = src_span.src_hi};
    SumRun(requests.data(), i, j, sums);
    bad |= sums.fail;
    // In order, the first destination is the lowest and the last end the furthest.
    dst_span.dst_lo = std::min(dst_span.dst_lo, sums.first_dst);
    dst_span.dst_hi = std::max(dst_span.dst_hi, sums.last_dst_end);
    dst_span.last_dst_end = sums.last_dst_end;
    src_span.src_lo = sums.src_lo;
    src_span.src_hi = sums.src_hi;
    Bucket& bucket = scan.buckets[context.bucket];
    Run& run = scan.runs.emplace_back();
    run.begin = i;
    run.end = j;
    run.context = static_cast<uint32_t>(context_index);
    run.has_empty = sums.empty > 0;
    // Each kind is the copies of one interval of sizes (KindOf tests bounds in turn),
    // so the smallest and the largest copy of one kind make every copy that kind.
    const KindBounds& bounds = context.bounds;
    const int kind = KindOf(sums.min_bytes, bounds);
    if (sums.min_bytes <= sums.max_bytes && kind == KindOf(sums.max_bytes, bounds)) {
      run.kind = kind;
      bucket.count[run.kind] += j - i - sums.empty;
      bucket.bytes[run.kind] += sums.sum;
    } else {
      for (size_t k = i; k < j; ++k) {
        if (requests[k].bytes == 0) continue;
        const int kind = KindOf(requests[k].bytes, bounds);
        ++bucket.count[kind];
        bucket.bytes[kind] += requests[k].bytes;
      }
    }
    i = j;
  }
  bool tracked = true;
  for (const RunContext& context : scan.contexts) {
    tracked &= context.src_slot < kTrackedDevices && context.dst_slot < kTrackedDevices;
  }
  bool apart = true;
  for (const DeviceSpan& span : spans) {
    // A null pointer starts a span at 0.
    bad |= span.src_lo == 0 || span.dst_lo == 0;
    // An empty span (lo > hi) meets nothing.
    apart &= span.dst_hi <= span.src_lo || span.src_hi <= span.dst_lo;
  }
  if (!bad && tracked && !apart) apart = SourcesOutsideDestinations(requests, spans);
  scan.valid = !bad && tracked && apart;
}

// out[k] = first + k for k < count; four at a time, which the compiler turns into
// vector stores (a plain loop stays scalar at -O2).
void FillIota(size_t* out, size_t count, size_t first) {
  size_t k = 0;
  for (; k + 4 <= count; k += 4) {
    out[k] = first + k;
    out[k + 1] = first + k + 1;
    out[k + 2] = first + k + 2;
    out[k + 3] = first + k + 3;
  }
  for (; k < count; ++k) out[k] = first + k;
}

// out[k] = value for k < count, likewise.
void FillInt(int* out, size_t count, int value) {
  size_t k = 0;
  for (; k + 4 <= count; k += 4) {
    out[k] = value;
    out[k + 1] = value;
    out[k + 2] = value;
    out[k + 3] = value;
  }
  for (; k < count; ++k) out[k] = value;
}

// The group of request `i` of `run` (-1 for no bytes), once the buckets have groups.
int GroupOf(const Scan& scan, const Run& run, const CopyRequest& r) {
  if (r.bytes == 0) return -1;
  const RunContext& context = scan.contexts[run.context];
  const int kind = run.kind >= 0 ? run.kind : KindOf(r.bytes, context.bounds);
  return scan.buckets[context.bucket].group_of_kind[kind];
}

// The rule of each kind of copy in `bucket`, and the counts that decided it (for the
// reason): fused when enough are small, batched when enough are left over.
void RulesFor(const Bucket& bucket, const CopyRequest& first, const Topology& topology,
              const PlanOptions& o, Rule (&rules)[kKinds], size_t& small_count,
              size_t& batchable_count) {
  const size_t small = bucket.count[static_cast<int>(Kind::kSmall)];
  small_count = 0;
  batchable_count = 0;
  switch (bucket.key.direction) {
    case Direction::kHostToHost:
      std::fill(std::begin(rules), std::end(rules), Rule::kHostToHost);
      return;
    case Direction::kPeer: {
      const int a = first.src_device.index();
      const int b = first.dst_device.index();
      if (!CanAccess(topology, a, b) && !CanAccess(topology, b, a)) {
        std::fill(std::begin(rules), std::end(rules), Rule::kNoPeerAccess);
        return;
      }
      small_count = small;
      rules[static_cast<int>(Kind::kSmall)] =
          small >= o.fused_min_count ? Rule::kPeerFused : Rule::kPeerFewSmall;
      rules[static_cast<int>(Kind::kLarge)] = Rule::kPeerLarge;
      rules[static_cast<int>(Kind::kStaged)] = Rule::kPeerLarge;  // Never happens.
      rules[static_cast<int>(Kind::kOther)] = Rule::kPeerLarge;   // Never happens.
      return;
    }
    default:
      break;
  }
  small_count = small;
  const bool fuse = small >= o.fused_min_count;
  batchable_count = bucket.count[static_cast<int>(Kind::kOther)] + (fuse ? 0 : small);
  const bool batch =
      topology.batch_memcpy_available && batchable_count >= o.batch_min_count;
  const Rule leftover = batch ? Rule::kBatched : Rule::kNotBatched;
  rules[static_cast<int>(Kind::kSmall)] =
      !fuse ? leftover
      : bucket.key.direction == Direction::kDeviceToDevice ? Rule::kFusedDevice
                                                            : Rule::kFusedPinned;
  rules[static_cast<int>(Kind::kStaged)] = Rule::kPageableStaging;
  rules[static_cast<int>(Kind::kLarge)] = Rule::kLarge;
  rules[static_cast<int>(Kind::kOther)] = leftover;
}

// The stream (lane) a group runs on; kStagedPeer also gets `second`.
void StreamsFor(Rule rule, Direction direction, Device src, Device dst,
                const Topology& topology, const PlanOptions& o,
                std::vector<StreamAssignment>& streams, int& first, int& second) {
  const auto index_of = [&](StreamAssignment s) {
    auto it = std::find(streams.begin(), streams.end(), s);
    if (it != streams.end()) return static_cast<int>(it - streams.begin());
    streams.push_back(s);
    return static_cast<int>(streams.size() - 1);
  };
  first = -1;
  second = -1;
  switch (direction) {
    case Direction::kHostToHost:
      return;
    case Direction::kHostToDevice:
      first = index_of({dst, Lane::kHostToDevice, Device::Cpu()});
      return;
    case Direction::kDeviceToHost:
      first = index_of({src, Lane::kDeviceToHost, Device::Cpu()});
      return;
    case Direction::kDeviceToDevice:
      first = index_of({src, Lane::kDeviceToDevice, Device::Cpu()});
      return;
    case Direction::kPeer:
      break;
  }
  if (rule == Rule::kNoPeerAccess) {
    first = index_of({src, Lane::kDeviceToHost, Device::Cpu()});
    second = index_of({dst, Lane::kHostToDevice, Device::Cpu()});
  } else if (rule == Rule::kPeerFused && CanAccess(topology, dst.index(), src.index()) &&
             !(o.peer_fused_kernel_pushes &&
               CanAccess(topology, src.index(), dst.index()))) {
    // A fused kernel pulls where only the destination has access, or when asked to
    // (peer_fused_kernel_pushes unset): it runs on the destination, reading the source.
    first = index_of({dst, Lane::kPeer, src});
  } else {
    // cudaMemcpyPeerAsync pushes from the source's stream (3% faster than pulling
    // between two H200s over NVLink, 8% between two H100s), and so do fused kernels
    // unless told to pull.
    first = index_of({src, Lane::kPeer, dst});
  }
}

}  // namespace

std::string_view DirectionName(Direction direction) {
  switch (direction) {
    case Direction::kHostToHost:
      return "h2h";
    case Direction::kHostToDevice:
      return "h2d";
    case Direction::kDeviceToHost:
      return "d2h";
    case Direction::kDeviceToDevice:
      return "d2d";
    case Direction::kPeer:
      return "peer";
  }
  return "?";
}

std::string_view MechanismName(Mechanism mechanism) {
  switch (mechanism) {
    case Mechanism::kHostMemcpy:
      return "host_memcpy";
    case Mechanism::kFusedKernel:
      return "fused_kernel";
    case Mechanism::kCopyEngine:
      return "copy_engine";
    case Mechanism::kBatchMemcpy:
      return "batch_memcpy";
    case Mechanism::kPeerCopy:
      return "peer_copy";
    case Mechanism::kPeerFusedKernel:
      return "peer_fused_kernel";
    case Mechanism::kStagedPeer:
      return "staged_peer";
    case Mechanism::kPageableStaging:
      return "pageable_staging";
  }
  return "?";
}

std::string_view LaneName(Lane lane) {
  switch (lane) {
    case Lane::kHostToDevice:
      return "h2d";
    case Lane::kDeviceToHost:
      return "d2h";
    case Lane::kDeviceToDevice:
      return "d2d";
    case Lane::kPeer:
      return "peer";
  }
  return "?";
}

std::string StreamAssignment::ToString() const {
  std::string s = absl::StrCat(device.ToString(), "/", ToAbsl(LaneName(lane)));
  if (lane == Lane::kPeer) absl::StrAppend(&s, ":", peer.ToString());
  return s;
}

std::string BatchPlan::ToString() const {
  size_t planned = 0;
  for (const CopyGroup& g : groups) planned += g.requests.size();
  std::string out = absl::StrCat(
      "BatchPlan: ", group_of_request.size(), " requests (", planned, " planned, ",
      group_of_request.size() - planned, " empty), ", FormatByteSize(total_bytes), ", ",
      groups.size(), " groups, ", streams.size(), " streams\n");
  absl::StrAppendFormat(&out, "  %-5s %-8s %-8s %-18s %7s %10s  %-30s %s\n", "dir",
                        "from", "to", "mechanism", "count", "bytes", "stream", "why");
  for (const CopyGroup& g : groups) {
    std::string stream = "-";
    if (g.stream >= 0) {
      stream = absl::StrCat("#", g.stream, " ", streams[g.stream].ToString());
    }
    if (g.second_stream >= 0) {
      absl::StrAppend(&stream, " + #", g.second_stream, " ",
                      streams[g.second_stream].ToString());
    }
    absl::StrAppendFormat(&out, "  %-5s %-8s %-8s %-18s %7d %10s  %-30s %s\n",
                          ToAbsl(DirectionName(g.direction)), g.src_device.ToString(),
                          g.dst_device.ToString(), ToAbsl(MechanismName(g.mechanism)),
                          g.requests.size(), FormatByteSize(g.bytes), stream, g.reason);
  }
  for (size_t i = 0; i < streams.size(); ++i) {
    absl::StrAppend(&out, "  stream #", i, ": ", streams[i].ToString(), "\n");
  }
  return out;
}

absl::StatusOr<BatchPlan> PlanBatch(absl::Span<const CopyRequest> requests,
                                    const Topology& topology,
                                    const PlanOptions& options) {
  GENESIS_RETURN_IF_ERROR(CheckTopology(topology));
  Scan scan;
  ScanBatch(requests, topology, options, scan);
  // Otherwise the checks that always made the messages decide.
  if (!scan.valid) GENESIS_RETURN_IF_ERROR(CheckAll(requests, topology));

  // The groups, in the order of their keys, then of their rules.
  absl::InlinedVector<Bucket*, 4> sorted;
  for (Bucket& bucket : scan.buckets) sorted.push_back(&bucket);
  std::sort(sorted.begin(), sorted.end(),
            [](const Bucket* a, const Bucket* b) { return a->key < b->key; });
  BatchPlan plan;
  for (Bucket* bucket : sorted) {
    const CopyRequest& first = requests[bucket->first];
    Rule rules[kKinds];
    size_t small_count = 0, batchable_count = 0;
    RulesFor(*bucket, first, topology, options, rules, small_count, batchable_count);
    // Rules follow Mechanism, and kinds sharing a rule share its group.
    for (int rule = 0; rule <= static_cast<int>(Rule::kPageableStaging); ++rule) {
      size_t count = 0, bytes = 0;
      const int g = static_cast<int>(plan.groups.size());
      for (int kind = 0; kind < kKinds; ++kind) {
        if (static_cast<int>(rules[kind]) != rule || bucket->count[kind] == 0) continue;
        count += bucket->count[kind];
        // Cannot overflow: the group's destinations are disjoint ranges of one device.
        bytes += bucket->bytes[kind];
        bucket->group_of_kind[kind] = g;
      }
      if (count == 0) continue;
      if (bytes > SIZE_MAX - plan.total_bytes) {
        size_t i = 0;  // The group's first request.
        for (const Run& run : scan.runs) {
          for (i = run.begin; i < run.end; ++i) {
            if (GroupOf(scan, run, requests[i]) == g) break;
          }
          if (i < run.end) break;
        }
        return Invalid(i, requests[i], "the batch's total size overflows size_t");
      }
      plan.total_bytes += bytes;
      CopyGroup& group = plan.groups.emplace_back();
      group.direction = bucket->key.direction;
      group.src_device = first.src_device;
      group.dst_device = first.dst_device;
      group.mechanism = MechanismOf(static_cast<Rule>(rule));
      group.reason = ReasonFor(static_cast<Rule>(rule), count, first, topology, options,
                               small_count, batchable_count);
      group.bytes = bytes;
      group.requests.reserve(count);
      StreamsFor(static_cast<Rule>(rule), group.direction, group.src_device,
                 group.dst_device, topology, options, plan.streams, group.stream,
                 group.second_stream);
    }
  }

  // Every request into its group, in ascending order: a long run of one kind and no
  // empty request goes whole into one group.
  std::vector<int>& group_of_request = plan.group_of_request;
  group_of_request.reserve(requests.size());
  for (const Run& run : scan.runs) {
    if (run.kind >= 0 && !run.has_empty && run.end - run.begin >= 16) {
      const int g = scan.buckets[scan.contexts[run.context].bucket].group_of_kind[run.kind];
      std::vector<size_t>& members = plan.groups[g].requests;
      const size_t count = run.end - run.begin;
      const size_t old_size = members.size();
      members.resize(old_size + count);
      FillIota(members.data() + old_size, count, run.begin);
      const size_t old_total = group_of_request.size();
      group_of_request.resize(old_total + count);
      FillInt(group_of_request.data() + old_total, count, g);
      continue;
    }
    for (size_t i = run.begin; i < run.end; ++i) {
      const int g = GroupOf(scan, run, requests[i]);
      group_of_request.push_back(g);
      if (g >= 0) plan.groups[g].requests.push_back(i);
    }
  }
  return plan;
}

absl::StatusOr<std::vector<CopyRequest>> MakeRequests(absl::Span<const SrcBuffer> srcs,
                                                      absl::Span<const DstBuffer> dsts,
                                                      absl::Span<const size_t> sizes) {
  if (srcs.size() != dsts.size() || srcs.size() != sizes.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MakeRequests: ", srcs.size(), " sources, ", dsts.size(), " destinations and ",
        sizes.size(), " sizes: the three lists must have the same length"));
  }
  std::vector<CopyRequest> requests(srcs.size());
  for (size_t i = 0; i < srcs.size(); ++i) {
    requests[i] = CopyRequest{srcs[i].ptr,    srcs[i].device, srcs[i].pinned, dsts[i].ptr,
                              dsts[i].device, dsts[i].pinned, sizes[i]};
  }
  return requests;
}

}  // namespace genesis::transfer
