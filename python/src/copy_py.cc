// Moving storages from Python: copy_storage, its asynchronous form, the batch copier
// (batch_copy, BatchStorage) of genesis/storage/copy_storage.h, and the threads that CPU
// storages' copies may use (set_host_copy_threads).
#include <memory>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "genesis/storage/copy_storage.h"
#include "genesis/storage/storage.h"
#include "python/src/arguments.h"
#include "python/src/bindings.h"
#include "python/src/errors.h"

namespace genesis::python {

namespace py = pybind11;
using storage::BatchStorage;
using storage::PendingCopy;
using storage::Storage;

void RegisterCopies(py::module_& m) {
  m.def(
      "copy_storage",
      [](const Storage& src, Storage dst) {
        WithoutGil([&] { return storage::CopyStorage(src, dst); });
      },
      py::arg("src"), py::arg("dst"),
      "Copies src's elements into dst (same shape and dtype, any devices) and returns when "
      "they are there.");

  py::class_<PendingCopy>(m, "PendingCopy",
                          "A copy in flight; it keeps both storages alive until done.")
      .def("wait", [](PendingCopy& c) { WithoutGil([&] { return c.Wait(); }); },
           "Blocks (without the GIL) until the copy is done; raises its error.")
      .def("done", [](const PendingCopy& c) { return Unwrap(c.Done()); });
  m.def(
      "copy_storage_async",
      [](const Storage& src, Storage dst, py::handle stream) {
        CUstream_st* s = ToStream(stream);
        return std::make_unique<PendingCopy>(
            WithoutGil([&] { return storage::CopyStorageAsync(src, dst, s); }));
      },
      py::arg("src"), py::arg("dst"), py::arg("stream") = py::none(),
      "Starts copying src into dst on `stream` (of the GPU involved; None: its legacy "
      "default stream) and returns a PendingCopy.");

  m.def(
      "batch_copy",
      [](const std::vector<Storage>& srcs, std::vector<Storage> dsts) {
        WithoutGil([&] { return storage::BatchCopy(srcs, absl::MakeSpan(dsts)); });
      },
      py::arg("srcs"), py::arg("dsts"),
      "Copies srcs[i] into dsts[i] for every i as one batch (fused kernels for many small "
      "copies, copy engines for large ones, each direction on its own stream) and returns "
      "when all are done. Every pair is checked before any byte moves.");
  m.def(
      "plan_batch_copy",
      [](const std::vector<Storage>& srcs, const std::vector<Storage>& dsts) {
        return Unwrap(storage::PlanBatchCopy(srcs, dsts)).ToString();
      },
      py::arg("srcs"), py::arg("dsts"), "How batch_copy would move these pairs, and why.");

  m.def(
      "set_host_copy_threads",
      [](int threads) { ThrowIfError(storage::SetHostCopyThreads(threads)); }, py::arg("threads"),
      "Sets the most threads that copies and dtype conversions of CPU storages (copy_, "
      "contiguous, clone, to) may use, the calling one among them, for the whole process: "
      "1 (the default) copies on the calling thread, 0 allows one per core. Copies and "
      "conversions of 2 MiB and more are shared. Raises ValueError for a negative count.");
  m.def("host_copy_threads", &storage::HostCopyThreads,
        "What set_host_copy_threads set last (1 if never).");

  py::class_<BatchStorage>(m, "BatchStorage", "Storages moved together (the seeds' BatchStorage).")
      .def(py::init([](const std::vector<Storage>& storages) {
             return BatchStorage(storages);
           }),
           py::arg("storages") = std::vector<Storage>())
      .def("__len__", &BatchStorage::size)
      .def("__getitem__",
           [](const BatchStorage& b, size_t i) {
             if (i >= b.size()) throw py::index_error("BatchStorage index out of range");
             return b[i];
           })
      .def_property_readonly("storages", &BatchStorage::storages)
      .def("append", &BatchStorage::Add, py::arg("storage"))
      .def("copy_",
           [](py::object self, const BatchStorage& src) {
             BatchStorage& b = self.cast<BatchStorage&>();
             WithoutGil([&] { return b.CopyFrom(src); });
             return self;
           },
           py::arg("src"), "Copies src's storages into these, pair by pair, in one batch.")
      .def(
          "to",
          [](const BatchStorage& b, py::handle device, bool pinned) {
            storage::StorageOptions options;
            options.pinned = pinned;
            const Device d = ToDevice(device);
            return WithoutGil([&] { return b.To(d, options); });
          },
          py::arg("device"), py::kw_only(), py::arg("pinned") = false,
          "New contiguous storages on `device` holding copies of these, made in one batch.");
}

}  // namespace genesis::python
