#include "python/src/errors.h"

#include <Python.h>

#include <string>

namespace genesis::python {
namespace {

namespace py = pybind11;

// Owned by the module (a reference is kept for the life of the process).
PyObject* out_of_memory_error = nullptr;

PyObject* ExceptionFor(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kResourceExhausted:
      return out_of_memory_error != nullptr ? out_of_memory_error : PyExc_MemoryError;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return PyExc_ValueError;
    case absl::StatusCode::kDeadlineExceeded:
      return PyExc_TimeoutError;
    case absl::StatusCode::kUnimplemented:
      return PyExc_NotImplementedError;
    case absl::StatusCode::kNotFound:
      return PyExc_FileNotFoundError;
    default:
      return PyExc_RuntimeError;
  }
}

}  // namespace

void RegisterErrors(py::module_& module) {
  // A MemoryError, and a RuntimeError as torch.OutOfMemoryError is, so that code written
  // for either catches it.
  py::tuple bases = py::make_tuple(py::handle(PyExc_MemoryError), py::handle(PyExc_RuntimeError));
  out_of_memory_error = PyErr_NewExceptionWithDoc(
      "genesis._genesis.OutOfMemoryError",
      "A memory pool could not serve an allocation; the message says which pool, how "
      "much was asked and what it holds.",
      bases.ptr(), nullptr);
  if (out_of_memory_error == nullptr) throw py::error_already_set();
  module.attr("OutOfMemoryError") = py::handle(out_of_memory_error);
}

void ThrowIfError(const absl::Status& status) {
  if (status.ok()) return;
  const std::string message(status.message());
  PyErr_SetString(ExceptionFor(status.code()), message.c_str());
  throw py::error_already_set();
}

void ThrowValueError(const std::string& message) {
  PyErr_SetString(PyExc_ValueError, message.c_str());
  throw py::error_already_set();
}

}  // namespace genesis::python
