#include "genesis/distributed/reducer.h"

#include <cstdint>
#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "genesis/core/status.h"
#include "genesis/cuda/stream.h"
#include "genesis/storage/layout.h"
#include "genesis/distributed/internal/bucket_memory.h"

namespace genesis::distributed {

using storage::Storage;

namespace {

// A 62-bit FNV-1a hash of what makes a plan's collectives line up across ranks: the
// number of gradients, and each bucket's dtype, element count and members. (absl's
// hash is seeded per process, so it cannot be compared between ranks.)
int64_t PlanHash(size_t num_grads, const std::vector<Bucket>& buckets) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  mix(num_grads);
  for (const Bucket& b : buckets) {
    mix(static_cast<uint64_t>(b.dtype));
    mix(b.bytes);
    mix(b.members.size());
    mix(b.members.front());
  }
  return static_cast<int64_t>(h >> 2);
}

// Whether every rank of `group` has the same `value`: one all_reduce (max) of the value
// and its negation.
absl::StatusOr<bool> SameOnEveryRank(ProcessGroup& group, int64_t value) {
  GENESIS_ASSIGN_OR_RETURN(Storage host, storage::Empty({2}, DType::kInt64, Device::Cpu()));
  const int64_t pair[2] = {value, -value};
  std::memcpy(host.data_ptr(), pair, sizeof(pair));
  Storage both = host;
  if (group.device().is_cuda()) {
    GENESIS_ASSIGN_OR_RETURN(both, host.To(group.device()));
  }
  GENESIS_ASSIGN_OR_RETURN(Work work, group.AllReduce(both, ReduceOp::kMax));
  GENESIS_RETURN_IF_ERROR(work.Wait());
  if (group.device().is_cuda()) {
    GENESIS_ASSIGN_OR_RETURN(host, both.To(Device::Cpu()));
  }
  int64_t reduced[2];
  std::memcpy(reduced, host.data_ptr(), sizeof(reduced));
  return reduced[0] == value && reduced[1] == -value;
}

std::string BucketName(const Bucket& b) {
  return absl::StrCat("bucket of gradients ", b.members.front(), "..", b.members.back());
}

}  // namespace

absl::StatusOr<std::unique_ptr<Reducer>> Reducer::Create(ProcessGroup& group,
                                                         std::vector<Storage> grads,
                                                         ReduceOp op,
                                                         const BucketOptions& options) {
  if (grads.empty()) return absl::InvalidArgumentError("Reducer: no gradients");
  for (size_t i = 0; i < grads.size(); ++i) {
    if (grads[i].defined() && grads[i].device() != group.device()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Reducer: gradient ", i, " is on ", grads[i].device().ToString(),
                       ", the group's storages on ", group.device().ToString()));
    }
  }
  GENESIS_ASSIGN_OR_RETURN(std::vector<Bucket> buckets, PlanBuckets(grads, options));
  for (const Bucket& b : buckets) {
    absl::Status supported = CheckReduction(op, b.dtype);
    if (!supported.ok()) {
      return absl::Status(supported.code(), absl::StrCat("Reducer, ", BucketName(b), ": ",
                                                         supported.message()));
    }
  }
  const int64_t hash = PlanHash(grads.size(), buckets);
  GENESIS_ASSIGN_OR_RETURN(bool same, SameOnEveryRank(group, hash));
  if (!same) {
    size_t bytes = 0;
    for (const Bucket& b : buckets) bytes += b.bytes;
    return absl::FailedPreconditionError(absl::StrCat(
        "Reducer: the bucket plan differs across ranks (rank ", group.rank(), ": ",
        grads.size(), " gradients in ", buckets.size(), " buckets of ", bytes,
        " bytes in all); every rank must give gradients of the same sizes and dtypes, in "
        "the same order and layout (views of one buffer or separate storages), with the "
        "same bucket options"));
  }
  std::unique_ptr<Reducer> reducer(
      new Reducer(group, std::move(grads), op, std::move(buckets)));
  GENESIS_RETURN_IF_ERROR(reducer->Prepare());
  return reducer;
}

Reducer::Reducer(ProcessGroup& group, std::vector<Storage> grads, ReduceOp op,
                 std::vector<Bucket> buckets)
    : group_(group),
      grads_(std::move(grads)),
      op_(op),
      buckets_(std::move(buckets)),
      bucket_of_(grads_.size()),
      marked_(grads_.size(), false),
      unmarked_in_bucket_(buckets_.size()),
      works_(buckets_.size()),
      reduced_(buckets_.size()),
      ready_(buckets_.size()) {
  for (size_t b = 0; b < buckets_.size(); ++b) {
    for (size_t i : buckets_[b].members) bucket_of_[i] = b;
    unmarked_in_bucket_[b] = buckets_[b].members.size();
  }
}

Reducer::~Reducer() {
  // Started collectives still use the buckets' memory; wait for them (errors were or
  // will be reported by their own Work).
  std::lock_guard<std::mutex> lock(mu_);
  for (const Work& work : works_) (void)work.Wait();
}

absl::Status Reducer::Prepare() {
  const bool on_gpu = group_.device().is_cuda();
  if (on_gpu) {
    GENESIS_ASSIGN_OR_RETURN(collective_stream_, internal::CollectiveStream(group_.device()));
  }
  comm_.reserve(buckets_.size());
  moves_.resize(buckets_.size());
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const Bucket& bucket = buckets_[b];
    if (!bucket.in_place) {
      GENESIS_ASSIGN_OR_RETURN(Storage flat, internal::PackBuffer(grads_, bucket));
      GENESIS_ASSIGN_OR_RETURN(moves_[b], internal::PlanMoves(grads_, bucket, flat));
      comm_.push_back(std::move(flat));
      continue;
    }
    GENESIS_ASSIGN_OR_RETURN(Storage view, internal::BucketView(grads_, bucket));
    if (on_gpu) {
      // The same memory, ordered by the collective stream, so that its collective runs
      // beside the gradients' stream; the wrapper keeps the gradients' memory alive.
      storage::ExternalOptions options;
      options.stream = collective_stream_;
      const int64_t elements = static_cast<int64_t>(bucket.bytes / ItemSize(bucket.dtype));
      GENESIS_ASSIGN_OR_RETURN(storage::Layout layout, storage::Layout::Contiguous({elements}));
      GENESIS_ASSIGN_OR_RETURN(
          view, Storage::FromExternal(view.data_ptr(), bucket.bytes, layout, bucket.dtype,
                                      view.device(), [view](void*) {}, options));
    }
    comm_.push_back(std::move(view));
  }
  return absl::OkStatus();
}

size_t Reducer::started() const {
  std::lock_guard<std::mutex> lock(mu_);
  return next_;
}

absl::Status Reducer::MarkReady(size_t index) {
  std::lock_guard<std::mutex> lock(mu_);
  if (index >= grads_.size()) {
    return absl::OutOfRangeError(absl::StrCat("Reducer::MarkReady: gradient ", index,
                                              " of ", grads_.size()));
  }
  if (marked_[index]) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Reducer::MarkReady: gradient ", index, " was already marked ready in this step"));
  }
  marked_[index] = true;
  --unmarked_in_bucket_[bucket_of_[index]];
  while (next_ < buckets_.size() && unmarked_in_bucket_[next_] == 0) {
    GENESIS_RETURN_IF_ERROR(StartLocked(next_));
    ++next_;
  }
  return absl::OkStatus();
}

absl::Status Reducer::StartLocked(size_t b) {
  const Bucket& bucket = buckets_[b];
  CUstream_st* const grad_stream = grads_[bucket.members.front()].stream();
  const bool on_gpu = collective_stream_ != nullptr;
  // GPU: everything of the bucket runs on the collective stream, after the work queued
  // on the gradients' stream so far: packing, the collective and unpacking. Backward
  // never writes a gradient again once it is marked ready, so the gradients' stream
  // need not wait for any of it until Finish.
  if (on_gpu) {
    // One event per bucket, made once: creating one per ordering cost the host more
    // than a layer of backward takes in a model of many small layers.
    if (!ready_[b].has_value()) {
      GENESIS_ASSIGN_OR_RETURN(ready_[b], cuda::Event::Create(group_.device().index()));
    }
    GENESIS_RETURN_IF_ERROR(ready_[b]->Record(grad_stream));
    GENESIS_RETURN_IF_ERROR(cuda::WaitEvent(collective_stream_, *ready_[b]));
  }
  if (!bucket.in_place) {
    GENESIS_RETURN_IF_ERROR(
        internal::RunMoves(moves_[b], comm_[b], /*pack=*/true, collective_stream_));
  }
  absl::StatusOr<Work> work = group_.AllReduce(comm_[b], op_);
  if (!work.ok()) {
    return absl::Status(work.status().code(), absl::StrCat(BucketName(bucket), ": ",
                                                           work.status().message()));
  }
  works_[b] = *std::move(work);
  if (on_gpu) {
    if (!bucket.in_place) {
      GENESIS_RETURN_IF_ERROR(
          internal::RunMoves(moves_[b], comm_[b], /*pack=*/false, collective_stream_));
    }
    if (!reduced_[b].has_value()) {
      GENESIS_ASSIGN_OR_RETURN(reduced_[b], cuda::Event::Create(group_.device().index()));
    }
    GENESIS_RETURN_IF_ERROR(reduced_[b]->Record(collective_stream_));
  }
  return absl::OkStatus();
}

absl::StatusOr<Work> Reducer::Finish() {
  std::lock_guard<std::mutex> lock(mu_);
  if (next_ < buckets_.size()) {
    std::vector<size_t> missing;
    for (size_t i = 0; i < grads_.size(); ++i) {
      if (!marked_[i]) missing.push_back(i);
    }
    const size_t shown = std::min<size_t>(missing.size(), 8);
    std::string text = absl::StrCat(
        "Reducer::Finish: ", missing.size(), " of ", grads_.size(),
        " gradients never marked ready in this step: ",
        absl::StrJoin(missing.begin(), missing.begin() + shown, ", "),
        missing.size() > shown ? ", ..." : "");
    if (missing.empty()) {
      text = absl::StrCat("Reducer::Finish: bucket ", next_, " failed to start earlier");
    }
    // The buckets this step started still reduce into their buffers (and, in place,
    // into the gradients): they complete before the next step may write either. Their
    // own errors are beside the point here; a group that fails reports them again.
    const size_t started = next_;
    (void)AwaitLocked(started, /*unpack=*/false);
    works_.assign(buckets_.size(), Work());
    ResetLocked();
    return absl::FailedPreconditionError(text);
  }
  const absl::Status status = AwaitLocked(buckets_.size(), /*unpack=*/true);
  std::vector<Work> works = std::move(works_);
  works_.assign(buckets_.size(), Work());
  ResetLocked();
  GENESIS_RETURN_IF_ERROR(status);
  return collective_stream_ != nullptr ? Work::All(std::move(works)) : Work();
}

absl::Status Reducer::AwaitLocked(size_t count, bool unpack) {
  absl::Status status;
  const bool on_gpu = collective_stream_ != nullptr;
  for (size_t b = 0; b < count; ++b) {
    const Bucket& bucket = buckets_[b];
    CUstream_st* const grad_stream = grads_[bucket.members.front()].stream();
    if (on_gpu) {
      status.Update(cuda::WaitEvent(grad_stream, *reduced_[b]));  // Unpacked there too.
      continue;
    }
    status.Update(works_[b].Wait());
    if (unpack && status.ok() && !bucket.in_place) {
      status.Update(internal::RunMoves(moves_[b], comm_[b], /*pack=*/false, grad_stream));
    }
  }
  return status;
}

void Reducer::ResetLocked() {
  marked_.assign(grads_.size(), false);
  for (size_t b = 0; b < buckets_.size(); ++b) {
    unmarked_in_bucket_[b] = buckets_[b].members.size();
  }
  next_ = 0;
}

}  // namespace genesis::distributed
