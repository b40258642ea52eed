#include "genesis/distributed/process_group.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "genesis/core/absl_compat.h"
#include "genesis/core/status.h"

namespace genesis::distributed {

using storage::Storage;

ProcessGroup::ProcessGroup(std::unique_ptr<Communicator> communicator)
    : communicator_(std::move(communicator)) {}

ProcessGroup::~ProcessGroup() = default;

absl::StatusOr<Buffer> ProcessGroup::CheckedBuffer(const Storage& storage,
                                                   std::string_view what,
                                                   bool written) const {
  const GroupInfo& info = communicator_->info();
  if (!storage.defined()) {
    return absl::InvalidArgumentError(
        absl::StrCat(ToAbsl(what), " is an undefined storage (", info.Describe(), ")"));
  }
  if (storage.device() != info.device) {
    return absl::InvalidArgumentError(absl::StrCat(
        ToAbsl(what), " is on ", storage.device().ToString(), ", but ", info.Describe(),
        " works on ", info.device.ToString()));
  }
  if (!storage.is_contiguous()) {
    return absl::InvalidArgumentError(absl::StrCat(
        ToAbsl(what), " ", storage.ToString(),
        " is not contiguous: collectives refuse strided views (call Contiguous() first)"));
  }
  if (written && storage.is_read_only()) {
    return absl::InvalidArgumentError(
        absl::StrCat(ToAbsl(what), " ", storage.ToString(), " is read-only"));
  }
  return Buffer{storage.data_ptr(), static_cast<size_t>(storage.numel()), storage.dtype(),
                storage.stream()};
}

absl::Status ProcessGroup::CheckRank(int rank, std::string_view what) const {
  if (rank < 0 || rank >= size()) {
    return absl::InvalidArgumentError(absl::StrCat(ToAbsl(what), " ", rank,
                                                   " is outside [0, ", size(), ") in ",
                                                   info().Describe()));
  }
  return absl::OkStatus();
}

namespace {

absl::Status SameDType(const Buffer& a, const Buffer& b, std::string_view what) {
  if (a.dtype != b.dtype) {
    return absl::InvalidArgumentError(absl::StrCat(
        ToAbsl(what), ": input is ", ToAbsl(DTypeName(a.dtype)), " but output is ",
        ToAbsl(DTypeName(b.dtype))));
  }
  return absl::OkStatus();
}

// `rule` says where `expected` comes from; with `world` > 0 it is "world size <world> x
// <rule>". Formats nothing unless the count is wrong.
absl::Status CountIs(const Buffer& buffer, size_t expected, std::string_view what,
                     std::string_view rule, int world = 0) {
  if (buffer.count == expected) [[likely]] return absl::OkStatus();
  const std::string because =
      world > 0 ? absl::StrCat("world size ", world, " x ", ToAbsl(rule)) : std::string(rule);
  return absl::InvalidArgumentError(absl::StrCat(ToAbsl(what), " has ", buffer.count,
                                                 " elements, expected ", expected, " (",
                                                 because, ")"));
}

}  // namespace

absl::StatusOr<Work> ProcessGroup::Retaining(absl::StatusOr<Work> work,
                                             absl::Span<const Storage* const> storages) {
  if (work.ok()) {
    for (const Storage* s : storages) work->Retain(s->KeepAlive());
  }
  return work;
}

absl::StatusOr<Work> ProcessGroup::Send(const Storage& storage, int dst, int tag) {
  return SendRecv({StoragePeerOp{PeerOp::Kind::kSend, storage, dst, tag}});
}

absl::StatusOr<Work> ProcessGroup::Recv(const Storage& storage, int src, int tag) {
  return SendRecv({StoragePeerOp{PeerOp::Kind::kRecv, storage, src, tag}});
}

absl::StatusOr<Work> ProcessGroup::SendRecv(absl::Span<const StoragePeerOp> ops) {
  if (ops.empty()) return Work();
  // Inline: a step of a ring exchange is a send and a receive.
  absl::InlinedVector<PeerOp, 2> peer_ops;
  for (const StoragePeerOp& op : ops) {
    const bool send = op.kind == PeerOp::Kind::kSend;
    GENESIS_ASSIGN_OR_RETURN(Buffer buffer,
                             CheckedBuffer(op.storage, send ? "send buffer" : "recv buffer",
                                           /*written=*/!send));
    GENESIS_RETURN_IF_ERROR(CheckRank(op.peer, send ? "destination rank" : "source rank"));
    if (op.peer == rank()) {
      return absl::InvalidArgumentError(absl::StrCat(
          send ? "send to" : "recv from", " rank ", op.peer, ", which is this rank, in ",
          info().Describe()));
    }
    if (op.tag < 0) {
      return absl::InvalidArgumentError(absl::StrCat("tag ", op.tag, " is negative"));
    }
    peer_ops.push_back(PeerOp{op.kind, buffer, op.peer, op.tag});
  }
  absl::InlinedVector<const Storage*, 2> storages;
  for (const StoragePeerOp& op : ops) storages.push_back(&op.storage);
  return Retaining(communicator_->SendRecv(peer_ops), storages);
}

absl::StatusOr<Work> ProcessGroup::Broadcast(const Storage& storage, int root) {
  GENESIS_ASSIGN_OR_RETURN(Buffer buffer, CheckedBuffer(storage, "broadcast buffer", true));
  GENESIS_RETURN_IF_ERROR(CheckRank(root, "broadcast root"));
  return Retaining(communicator_->Broadcast(buffer, root), {&storage});
}

absl::StatusOr<Work> ProcessGroup::Reduce(const Storage& storage, int root, ReduceOp op) {
  GENESIS_ASSIGN_OR_RETURN(Buffer buffer, CheckedBuffer(storage, "reduce buffer", true));
  GENESIS_RETURN_IF_ERROR(CheckRank(root, "reduce root"));
  GENESIS_RETURN_IF_ERROR(communicator_->SupportsReduction(buffer.dtype, op));
  return Retaining(communicator_->Reduce(buffer, root, op), {&storage});
}

absl::StatusOr<Work> ProcessGroup::AllReduce(const Storage& storage, ReduceOp op) {
  GENESIS_ASSIGN_OR_RETURN(Buffer buffer, CheckedBuffer(storage, "all_reduce buffer", true));
  GENESIS_RETURN_IF_ERROR(communicator_->SupportsReduction(buffer.dtype, op));
  return Retaining(communicator_->AllReduce(buffer, op), {&storage});
}

absl::StatusOr<Work> ProcessGroup::AllGather(const Storage& input, const Storage& output) {
  GENESIS_ASSIGN_OR_RETURN(Buffer in, CheckedBuffer(input, "all_gather input", false));
  GENESIS_ASSIGN_OR_RETURN(Buffer out, CheckedBuffer(output, "all_gather output", true));
  GENESIS_RETURN_IF_ERROR(SameDType(in, out, "all_gather"));
  GENESIS_RETURN_IF_ERROR(CountIs(out, in.count * size(), "all_gather output", "input", size()));
  return Retaining(communicator_->AllGather(in, out), {&input, &output});
}

absl::StatusOr<Work> ProcessGroup::AllGather(const Storage& input,
                                             absl::Span<const Storage> outputs) {
  GENESIS_ASSIGN_OR_RETURN(Buffer in, CheckedBuffer(input, "all_gather input", false));
  if (outputs.size() != static_cast<size_t>(size())) {
    return absl::InvalidArgumentError(absl::StrCat("all_gather into ", outputs.size(),
                                                   " storages, expected one per rank (",
                                                   size(), ")"));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    absl::StatusOr<Buffer> out = CheckedBuffer(outputs[i], "all_gather output", true);
    if (out.ok()) {
      GENESIS_RETURN_IF_ERROR(SameDType(in, *out, "all_gather"));
      if (out->count == in.count) [[likely]] continue;
    }
    // Wrong: now the output's index is put into words.
    const std::string what = absl::StrCat("all_gather output ", i);
    if (!out.ok()) return CheckedBuffer(outputs[i], what, true).status();
    return CountIs(*out, in.count, what, "the input's size");
  }
  storage::StorageOptions options;
  options.stream = input.stream();
  GENESIS_ASSIGN_OR_RETURN(
      Storage flat, storage::Empty({static_cast<int64_t>(in.count) * size()}, input.dtype(),
                                   device(), options));
  GENESIS_ASSIGN_OR_RETURN(Work gathered, AllGather(input, flat));
  if (device().is_cpu()) GENESIS_RETURN_IF_ERROR(gathered.Wait());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const int64_t n = static_cast<int64_t>(in.count);
    GENESIS_ASSIGN_OR_RETURN(Storage chunk, flat.Slice(0, n * i, n * (i + 1)));
    GENESIS_ASSIGN_OR_RETURN(Storage shaped, chunk.Reshape(outputs[i].shape()));
    Storage target = outputs[i];
    GENESIS_RETURN_IF_ERROR(target.CopyFrom(shaped));
  }
  return gathered;
}

absl::StatusOr<Work> ProcessGroup::ReduceScatter(const Storage& input, const Storage& output,
                                                 ReduceOp op) {
  GENESIS_ASSIGN_OR_RETURN(Buffer in, CheckedBuffer(input, "reduce_scatter input", false));
  GENESIS_ASSIGN_OR_RETURN(Buffer out, CheckedBuffer(output, "reduce_scatter output", true));
  GENESIS_RETURN_IF_ERROR(SameDType(in, out, "reduce_scatter"));
  GENESIS_RETURN_IF_ERROR(
      CountIs(in, out.count * size(), "reduce_scatter input", "output", size()));
  GENESIS_RETURN_IF_ERROR(communicator_->SupportsReduction(in.dtype, op));
  return Retaining(communicator_->ReduceScatter(in, out, op), {&input, &output});
}

absl::StatusOr<Work> ProcessGroup::AllToAll(const Storage& input, const Storage& output) {
  GENESIS_ASSIGN_OR_RETURN(Buffer in, CheckedBuffer(input, "all_to_all input", false));
  GENESIS_ASSIGN_OR_RETURN(Buffer out, CheckedBuffer(output, "all_to_all output", true));
  GENESIS_RETURN_IF_ERROR(SameDType(in, out, "all_to_all"));
  GENESIS_RETURN_IF_ERROR(CountIs(out, in.count, "all_to_all output", "the input's size"));
  if (in.count % size() != 0) {
    return absl::InvalidArgumentError(absl::StrCat("all_to_all input of ", in.count,
                                                   " elements does not split into ", size(),
                                                   " equal chunks"));
  }
  return Retaining(communicator_->AllToAll(in, out), {&input, &output});
}

absl::StatusOr<Work> ProcessGroup::Barrier() { return communicator_->Barrier(); }

absl::StatusOr<std::unique_ptr<ProcessGroup>> ProcessGroup::Split(std::vector<int> ranks,
                                                                  const std::string& name) {
  if (ranks.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("split of ", info().Describe(), " into no ranks"));
  }
  std::sort(ranks.begin(), ranks.end());
  for (size_t i = 0; i < ranks.size(); ++i) {
    GENESIS_RETURN_IF_ERROR(CheckRank(ranks[i], "split rank"));
    if (i > 0 && ranks[i] == ranks[i - 1]) {
      return absl::InvalidArgumentError(
          absl::StrCat("split rank ", ranks[i], " is listed twice"));
    }
  }
  if (name.empty() || name.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sub-group name ", Quoted(name), " must be non-empty and without '/'"));
  }
  GENESIS_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> sub,
                           communicator_->Split(ranks, name));
  if (sub == nullptr) return std::unique_ptr<ProcessGroup>();
  return std::make_unique<ProcessGroup>(std::move(sub));
}

}  // namespace genesis::distributed
