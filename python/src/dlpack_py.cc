// DLPack both ways: Storage.__dlpack__ / __dlpack_device__ (what numpy.from_dlpack,
// torch.from_dlpack and cupy.from_dlpack call) and genesis.from_dlpack, zero-copy.
#include <Python.h>

#include <cstdint>
#include <string>
#include <utility>

#include <dlpack/dlpack.h>
#include <pybind11/pybind11.h>

#include "absl/strings/str_cat.h"
#include "genesis/core/status.h"
#include "genesis/cuda/event.h"
#include "genesis/cuda/stream.h"
#include "genesis/storage/dlpack.h"
#include "genesis/storage/storage.h"
#include "python/src/arguments.h"
#include "python/src/bindings.h"
#include "python/src/errors.h"

namespace genesis::python {
namespace {

namespace py = pybind11;
using storage::Storage;

constexpr const char* kCapsuleName = "dltensor";
constexpr const char* kUsedCapsuleName = "used_dltensor";

// The DLPack device of `s`'s memory: kDLCUDAHost for pinned host memory.
std::pair<int, int> DLDeviceOf(const Storage& s) {
  const int type = s.device().is_cuda() ? kDLCUDA : s.is_pinned() ? kDLCUDAHost : kDLCPU;
  return {type, s.device().index()};
}

// A capsule nobody consumed still owns its tensor.
void DeleteUnconsumed(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, kCapsuleName)) return;  // Consumed (renamed).
  auto* tensor = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kCapsuleName));
  if (tensor != nullptr && tensor->deleter != nullptr) tensor->deleter(tensor);
}

// The DLPack stream argument for CUDA: the consumer's stream, which must not read
// before the storage's stream has written. -1: the consumer orders it itself; None or 1:
// the legacy default stream; 2: the per-thread default stream; others: a cudaStream_t.
void OrderForConsumer(const Storage& s, py::handle stream) {
  if (stream.is_none()) stream = py::int_(1);
  if (!PyLong_Check(stream.ptr())) {
    ThrowValueError(absl::StrCat("__dlpack__: stream must be an int or None, not ",
                                 py::repr(stream).cast<std::string>()));
  }
  const int64_t value = stream.cast<int64_t>();
  if (value == -1) return;
  if (value == 0 || value < -1) {
    ThrowValueError(absl::StrCat("__dlpack__: stream ", value,
                                 " is not allowed for CUDA (1 is the legacy default stream)"));
  }
  auto* consumer = value == 1 ? nullptr  // The legacy default stream.
                   : value == 2 ? reinterpret_cast<CUstream_st*>(uintptr_t{2})  // cudaStreamPerThread.
                                : reinterpret_cast<CUstream_st*>(static_cast<uintptr_t>(value));
  if (consumer == s.stream()) return;
  WithoutGil([&]() -> absl::Status {
    GENESIS_ASSIGN_OR_RETURN(cuda::Event event, cuda::Event::Create(s.device().index()));
    GENESIS_RETURN_IF_ERROR(event.Record(s.stream()));
    GENESIS_RETURN_IF_ERROR(cuda::WaitEvent(consumer, event));
    return s.RecordStream(consumer);
  });
}

// max_version is accepted and the legacy (unversioned) capsule returned, which the
// protocol allows a producer to do.
py::object ToCapsule(const Storage& s, py::handle stream, py::handle /*max_version*/,
                     py::handle dl_device, py::handle copy) {
  Storage exported = s;
  if (!dl_device.is_none()) {
    const auto wanted = dl_device.cast<std::pair<int, int>>();
    if (wanted != DLDeviceOf(s)) {
      PyErr_SetString(PyExc_BufferError,
                      absl::StrCat("__dlpack__: dl_device (", wanted.first, ", ", wanted.second,
                                   ") is not the storage's device ", s.device().ToString())
                          .c_str());
      throw py::error_already_set();
    }
  }
  if (!copy.is_none() && copy.cast<bool>()) exported = Unwrap(s.Clone());
  if (s.device().is_cuda()) {
    OrderForConsumer(exported, stream);
  } else if (!stream.is_none()) {
    ThrowValueError(absl::StrCat("__dlpack__: a CPU storage takes no stream, got ",
                                 py::repr(stream).cast<std::string>()));
  }
  DLManagedTensor* tensor = Unwrap(storage::ToDLPack(exported));
  PyObject* capsule = PyCapsule_New(tensor, kCapsuleName, &DeleteUnconsumed);
  if (capsule == nullptr) {
    tensor->deleter(tensor);
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::object>(capsule);
}

// Takes the tensor out of a "dltensor" capsule, marking it consumed.
DLManagedTensor* Consume(py::handle capsule) {
  if (PyCapsule_IsValid(capsule.ptr(), kUsedCapsuleName)) {
    ThrowValueError("from_dlpack: the DLPack capsule was already consumed");
  }
  if (!PyCapsule_IsValid(capsule.ptr(), kCapsuleName)) {
    const char* name = PyCapsule_GetName(capsule.ptr());
    PyErr_Clear();
    ThrowValueError(absl::StrCat("from_dlpack: not a DLPack capsule (its name is '",
                                 name == nullptr ? "" : name, "', expected 'dltensor')"));
  }
  auto* tensor = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), kCapsuleName));
  if (tensor == nullptr) throw py::error_already_set();
  if (PyCapsule_SetName(capsule.ptr(), kUsedCapsuleName) != 0) throw py::error_already_set();
  return tensor;
}

Storage FromDLPack(py::handle source) {
  py::object capsule;
  if (PyCapsule_CheckExact(source.ptr())) {
    capsule = py::reinterpret_borrow<py::object>(source);
  } else if (py::hasattr(source, "__dlpack__")) {
    // Imported CUDA memory is used on the legacy default stream (1), which is what the
    // producer is asked to order its work before.
    bool cuda = false;
    if (py::hasattr(source, "__dlpack_device__")) {
      cuda = source.attr("__dlpack_device__")().cast<py::tuple>()[0].cast<int>() == kDLCUDA;
    }
    capsule = cuda ? source.attr("__dlpack__")(py::arg("stream") = 1) : source.attr("__dlpack__")();
  } else {
    ThrowValueError(absl::StrCat("from_dlpack: ", py::repr(source).cast<std::string>(),
                                 " is neither a DLPack capsule nor has __dlpack__"));
  }
  DLManagedTensor* tensor = Consume(capsule);
  return Unwrap(storage::FromDLPack(tensor));
}

}  // namespace

void RegisterDLPack(py::module_& m) {
  py::class_<Storage> cls = py::reinterpret_borrow<py::class_<Storage>>(m.attr("Storage"));
  cls.def("__dlpack__", &ToCapsule, py::kw_only(), py::arg("stream") = py::none(),
          py::arg("max_version") = py::none(), py::arg("dl_device") = py::none(),
          py::arg("copy") = py::none(),
          "A 'dltensor' capsule of this view (legacy, unversioned DLPack) that keeps the "
          "memory alive; for CUDA storages the consumer's `stream` first waits for this "
          "storage's.")
      .def("__dlpack_device__", [](const Storage& s) {
        const auto [type, index] = DLDeviceOf(s);
        return py::make_tuple(type, index);
      });
  m.def("from_dlpack", &FromDLPack, py::arg("source"),
        "A Storage over the memory of `source` (anything with __dlpack__, or a 'dltensor' "
        "capsule), without a copy; the memory stays alive while either side holds it.");
}

}  // namespace genesis::python
