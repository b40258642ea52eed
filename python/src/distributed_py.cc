// genesis.distributed: process groups made from a launcher's environment (torchrun,
// Slurm, Open MPI; genesis/distributed/launch_env.h) and their collectives on storages.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "genesis/distributed/process_group.h"
#include "genesis/distributed/process_group_factory.h"
#include "genesis/distributed/reduce_op.h"
#include "genesis/distributed/registration_policy.h"
#include "genesis/distributed/work.h"
#include "genesis/storage/storage.h"
#include "python/src/bindings.h"
#include "python/src/errors.h"

namespace genesis::python {
namespace {

namespace py = pybind11;
using distributed::ProcessGroup;
using distributed::ReduceOp;
using distributed::Work;
using storage::Storage;

ReduceOp ToReduceOp(const std::string& name) { return Unwrap(distributed::ParseReduceOp(name)); }

distributed::Backend ToBackend(const std::string& name) {
  if (name == "gloo") return distributed::Backend::kGloo;
  if (name == "nccl") return distributed::Backend::kNccl;
  ThrowValueError(absl::StrCat("not a backend: '", name, "' (gloo for CPU storages, nccl for CUDA)"));
}

// An operation issued: waited for here unless the caller asked for its Work.
py::object Finish(absl::StatusOr<Work> issued, bool async_op) {
  Work work = Unwrap(std::move(issued));
  if (async_op) return py::cast(std::move(work));
  WithoutGil([&] { return work.Wait(); });
  return py::none();
}

}  // namespace

void RegisterDistributed(py::module_& m) {
  py::module_ d = m.def_submodule("distributed", "Process groups and collectives.");

  py::class_<Work>(d, "Work", "An operation in flight; wait() blocks until it is done.")
      .def(
          "wait",
          [](const Work& w, py::handle timeout) {
            if (timeout.is_none()) {
              WithoutGil([&] { return w.Wait(); });
            } else {
              const absl::Duration limit = absl::Seconds(timeout.cast<double>());
              WithoutGil([&] { return w.Wait(limit); });
            }
          },
          py::arg("timeout") = py::none(),
          "Waits (without the GIL) until the operation is done; raises its error, or "
          "TimeoutError after `timeout` seconds.")
      .def("is_completed", &Work::Done);

  py::class_<ProcessGroup>(d, "ProcessGroup",
                           "Ranks that run collectives together (Gloo: CPU storages; NCCL: "
                           "CUDA storages of each rank's GPU).")
      .def_property_readonly("rank", &ProcessGroup::rank)
      .def_property_readonly("size", &ProcessGroup::size)
      .def_property_readonly("name", &ProcessGroup::name)
      .def_property_readonly("backend", &ProcessGroup::backend)
      .def("health", [](const ProcessGroup& g) { ThrowIfError(g.health()); },
           "Raises the error that broke the group, if any.")
      .def(
          "all_reduce",
          [](ProcessGroup& g, const Storage& s, const std::string& op, bool async_op) {
            return Finish(g.AllReduce(s, ToReduceOp(op)), async_op);
          },
          py::arg("storage"), py::arg("op") = "sum", py::kw_only(), py::arg("async_op") = false,
          "Reduces `storage` across the ranks in place (sum, prod, min, max, avg).")
      .def(
          "broadcast",
          [](ProcessGroup& g, const Storage& s, int src, bool async_op) {
            return Finish(g.Broadcast(s, src), async_op);
          },
          py::arg("storage"), py::arg("src"), py::kw_only(), py::arg("async_op") = false)
      .def(
          "reduce",
          [](ProcessGroup& g, const Storage& s, int dst, const std::string& op, bool async_op) {
            return Finish(g.Reduce(s, dst, ToReduceOp(op)), async_op);
          },
          py::arg("storage"), py::arg("dst"), py::arg("op") = "sum", py::kw_only(),
          py::arg("async_op") = false)
      .def(
          "all_gather",
          [](ProcessGroup& g, const Storage& output, const Storage& input, bool async_op) {
            return Finish(g.AllGather(input, output), async_op);
          },
          py::arg("output"), py::arg("input"), py::kw_only(), py::arg("async_op") = false,
          "Every rank's `input`, concatenated in rank order into `output` (size x input).")
      .def(
          "reduce_scatter",
          [](ProcessGroup& g, const Storage& output, const Storage& input, const std::string& op,
             bool async_op) { return Finish(g.ReduceScatter(input, output, ToReduceOp(op)), async_op); },
          py::arg("output"), py::arg("input"), py::arg("op") = "sum", py::kw_only(),
          py::arg("async_op") = false)
      .def(
          "all_to_all",
          [](ProcessGroup& g, const Storage& output, const Storage& input, bool async_op) {
            return Finish(g.AllToAll(input, output), async_op);
          },
          py::arg("output"), py::arg("input"), py::kw_only(), py::arg("async_op") = false)
      .def(
          "send",
          [](ProcessGroup& g, const Storage& s, int dst, int tag, bool async_op) {
            return Finish(g.Send(s, dst, tag), async_op);
          },
          py::arg("storage"), py::arg("dst"), py::arg("tag") = 0, py::kw_only(),
          py::arg("async_op") = false)
      .def(
          "recv",
          [](ProcessGroup& g, const Storage& s, int src, int tag, bool async_op) {
            return Finish(g.Recv(s, src, tag), async_op);
          },
          py::arg("storage"), py::arg("src"), py::arg("tag") = 0, py::kw_only(),
          py::arg("async_op") = false)
      .def("barrier", [](ProcessGroup& g) { return Finish(g.Barrier(), false); })
      .def(
          "split",
          [](ProcessGroup& g, std::vector<int> ranks, const std::string& name) {
            return WithoutGil([&] { return g.Split(std::move(ranks), name); });
          },
          py::arg("ranks"), py::arg("name"),
          "A group of `ranks` of this one; every rank of this group must call it (those "
          "outside `ranks` get None).");

  d.def(
      "init_process_group",
      [](const std::string& backend, double timeout, const std::string& name, bool nccl_interop,
         const std::string& nccl_registration, size_t nccl_one_shot_bytes,
         size_t nccl_copy_engine_bytes) {
        distributed::GroupOptions options;
        options.name = name;
        options.timeout = absl::Seconds(timeout);
        options.nccl_interop = nccl_interop;
        options.nccl_registration =
            Unwrap(distributed::ParseNcclRegistration(nccl_registration));
        if (nccl_one_shot_bytes > distributed::nccl_backend::kOneShotMaxBytes) {
          ThrowValueError(absl::StrCat("nccl_one_shot_bytes = ", nccl_one_shot_bytes, " (at most ",
                                       distributed::nccl_backend::kOneShotMaxBytes, ")"));
        }
        options.nccl_one_shot_bytes = nccl_one_shot_bytes;
        options.nccl_copy_engine_bytes = nccl_copy_engine_bytes;
        const distributed::Backend b = ToBackend(backend);
        return WithoutGil([&] { return distributed::ProcessGroupFromEnvironment(b, options); });
      },
      py::arg("backend") = "gloo", py::kw_only(), py::arg("timeout") = 600.0,
      py::arg("name") = "world", py::arg("nccl_interop") = false,
      py::arg("nccl_registration") = "auto",
      py::arg("nccl_one_shot_bytes") = distributed::kDefaultNcclOneShotBytes,
      py::arg("nccl_copy_engine_bytes") = 0,
      "The group of every rank of the job, from the launcher's variables (torchrun's RANK, "
      "WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT; Slurm's; Open MPI's): a missing or "
      "contradicting variable raises ValueError naming it, a group that does not form "
      "within `timeout` seconds raises naming what it waited for. `nccl_registration` "
      "chooses which NCCL operations run on buffers registered with NCCL: 'auto' (all_gather "
      "of 16 to 64 MiB, all_to_all of 4 to 64 MiB and each sent or received message of 2 to "
      "64 MiB, where "
      "that was measured faster), 'on' (every operation) or 'off'; "
      "every rank must pass the same, GENESIS_NCCL_REGISTER overrides it, and another word "
      "raises ValueError. `nccl_one_shot_bytes`: all_reduce, reduce, broadcast, all_gather, "
      "reduce_scatter, all_to_all and sends and receives in which a rank sends up to this "
      "many bytes (a collective's piece times world size - 1; all_reduce's and broadcast's "
      "pieces may be world size / 2 times as large, reduce's 2 / world size as large; a "
      "message, up to 1 MiB; at most 4 MiB, else "
      "ValueError) run genesis's one-shot kernels where the GPUs reach each other's "
      "memory (one node), 0 for none; every rank must pass the same, "
      "GENESIS_NCCL_ONE_SHOT_BYTES overrides it. `nccl_copy_engine_bytes`: all_reduces "
      "summing float16, bfloat16, float32 or float64 of at least this many bytes move their "
      "bytes through the GPUs' copy engines where the one-shot kernels could run, 0 (the "
      "default) for none; every rank must pass the same, GENESIS_NCCL_COPY_ENGINE_BYTES "
      "overrides it.");
}

}  // namespace genesis::python
