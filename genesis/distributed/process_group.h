// ProcessGroup: collectives and point-to-point transfers of storages between the
// processes of a distributed job (data-parallel training across GPUs, processes and
// nodes).
//
//   GENESIS_ASSIGN_OR_RETURN(std::unique_ptr<ProcessGroup> world,
//                            ProcessGroupFromEnvironment(Device::Cuda(local_rank)));
//   GENESIS_ASSIGN_OR_RETURN(Work work, world->AllReduce(grad, ReduceOp::kAvg));
//   GENESIS_RETURN_IF_ERROR(work.Wait());
//
// A group works on one device: NCCL groups on one GPU (cuda:N storages), Gloo groups on
// the CPU (CPU storages, pinned or not); process_group_factory.h makes them. Every
// operation checks its storages before anything is queued, and fails with
// InvalidArgument naming the value that is wrong: a storage on another device than the
// group's, a non-contiguous storage (refused, not copied: a collective writes in place,
// and a silent copy would leave the caller's view unchanged; call Contiguous() first), a
// read-only output, sizes that disagree (an all_gather output that is not size() times
// the input), dtypes that differ, a rank out of range, a reduction the backend does not
// have (NCCL: bool and int16; any backend: avg of integers). After a failure the group
// is unusable and every call fails with FailedPrecondition saying why.
//
// Operations are queued on the storage's stream (NCCL) or the group's worker thread
// (Gloo) and return a Work (work.h); the Work keeps the storages alive until the
// operation has finished. All ranks must call the same collectives in the same order.
//
// CUDA graphs (NCCL): an operation issued while its storage's stream is captured
// (cuda/graph.h) is recorded into the graph and runs at every replay; its Work has
// finished at once and keeps nothing alive, so the storages must outlive the graph's
// replays, and whoever replays it waits for the replay's stream.
// A ProcessGroup may be used from several threads, but the order of collectives must be
// the same on every rank, which in practice means one thread issues them.
#ifndef GENESIS_DISTRIBUTED_PROCESS_GROUP_H_
#define GENESIS_DISTRIBUTED_PROCESS_GROUP_H_

#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "genesis/core/device.h"
#include "genesis/distributed/communicator.h"
#include "genesis/distributed/reduce_op.h"
#include "genesis/distributed/work.h"
#include "genesis/storage/storage.h"

namespace genesis::distributed {

// One send or receive of a batch (ProcessGroup::SendRecv).
struct StoragePeerOp {
  PeerOp::Kind kind = PeerOp::Kind::kSend;
  storage::Storage storage;
  int peer = 0;
  int tag = 0;
};

class ProcessGroup {
 public:
  explicit ProcessGroup(std::unique_ptr<Communicator> communicator);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return communicator_->info().rank; }
  int size() const { return communicator_->info().size; }
  const std::string& name() const { return communicator_->info().name; }
  // "nccl" or "gloo".
  const std::string& backend() const { return communicator_->info().backend; }
  Device device() const { return communicator_->info().device; }
  const GroupInfo& info() const { return communicator_->info(); }
  // OK while usable; the failure that made the group unusable otherwise.
  absl::Status health() const { return communicator_->health(); }

  // Point to point. `tag` (0 <= tag < 2^31) pairs a send with a receive.
  absl::StatusOr<Work> Send(const storage::Storage& storage, int dst, int tag = 0);
  absl::StatusOr<Work> Recv(const storage::Storage& storage, int src, int tag = 0);
  // Sends and receives posted together, so none waits for another (one NCCL group).
  absl::StatusOr<Work> SendRecv(absl::Span<const StoragePeerOp> ops);

  // Every rank's storage ends as root's.
  absl::StatusOr<Work> Broadcast(const storage::Storage& storage, int root);
  // Root's storage ends as the reduction over all ranks; the others' are unchanged.
  absl::StatusOr<Work> Reduce(const storage::Storage& storage, int root, ReduceOp op);
  // Every rank's storage ends as the reduction over all ranks.
  absl::StatusOr<Work> AllReduce(const storage::Storage& storage, ReduceOp op);
  // `output` (size() x input.numel() elements, any shape) ends with every rank's input,
  // in rank order.
  absl::StatusOr<Work> AllGather(const storage::Storage& input,
                                 const storage::Storage& output);
  // The same into size() storages, one per rank, each shaped like `input`. Through a
  // flat buffer: on the CPU the call returns once it has finished.
  absl::StatusOr<Work> AllGather(const storage::Storage& input,
                                 absl::Span<const storage::Storage> outputs);
  // `input` holds size() chunks of output.numel() elements; `output` ends as the
  // reduction over all ranks of their chunk number rank().
  absl::StatusOr<Work> ReduceScatter(const storage::Storage& input,
                                     const storage::Storage& output, ReduceOp op);
  // Chunk j of `input` (size() equal chunks) goes to rank j; chunk i of `output` comes
  // from rank i.
  absl::StatusOr<Work> AllToAll(const storage::Storage& input,
                                const storage::Storage& output);
  // Returns a Work that finishes once every rank has reached the barrier.
  absl::StatusOr<Work> Barrier();

  // Symmetric memory (NCCL groups): `bytes` of new device memory registered on every
  // rank as one NCCL window, for SymmetricWindow (symmetric_window.h). Collective: every
  // rank calls it with the same size. Unimplemented for Gloo groups; FailedPrecondition
  // where NCCL has no symmetric support here or another rank failed to allocate.
  absl::StatusOr<std::shared_ptr<SymmetricMemory>> AllocateSymmetric(size_t bytes) {
    return communicator_->AllocateSymmetric(bytes);
  }

  // A group of the ranks in `ranks` (distinct, in [0, size())), named `name`; every rank
  // of this group calls it with the same arguments, with no operation in flight. Members
  // get the new group (their rank is their index in the sorted ranks); the others get
  // nullptr.
  absl::StatusOr<std::unique_ptr<ProcessGroup>> Split(std::vector<int> ranks,
                                                      const std::string& name);

  // Makes the group unusable: pending operations fail with `why`.
  void Abort(const absl::Status& why) { communicator_->Abort(why); }

  Communicator& communicator() { return *communicator_; }

 private:
  absl::StatusOr<Buffer> CheckedBuffer(const storage::Storage& storage, std::string_view what,
                                       bool written) const;
  absl::Status CheckRank(int rank, std::string_view what) const;
  // `work`, keeping the memory of `storages` alive until it has finished. Pointers: a
  // copy of a Storage (its layout and a reference) per operation cost more than keeping
  // its memory does.
  absl::StatusOr<Work> Retaining(absl::StatusOr<Work> work,
                                 absl::Span<const storage::Storage* const> storages);
  absl::StatusOr<Work> Retaining(absl::StatusOr<Work> work,
                                 std::initializer_list<const storage::Storage*> storages) {
    return Retaining(std::move(work), absl::MakeConstSpan(storages.begin(), storages.size()));
  }

  std::unique_ptr<Communicator> communicator_;
};

}  // namespace genesis::distributed

#endif  // GENESIS_DISTRIBUTED_PROCESS_GROUP_H_
