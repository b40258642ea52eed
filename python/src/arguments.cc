#include "python/src/arguments.h"

#include <Python.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "python/src/errors.h"

namespace genesis::python {
namespace {

namespace py = pybind11;

std::string Repr(py::handle value) { return py::repr(value).cast<std::string>(); }

int64_t ToInt(py::handle value, const char* what) {
  // bool is an int in Python; a shape of True is a mistake.
  if (!PyLong_Check(value.ptr()) || PyBool_Check(value.ptr())) {
    ThrowValueError(absl::StrCat(what, " must be an int, not ", Repr(value)));
  }
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
  if (overflow != 0) ThrowValueError(absl::StrCat(what, " is out of range: ", Repr(value)));
  return v;
}

}  // namespace

Device ToDevice(py::handle value) {
  if (value.is_none()) return Device::Cpu();
  if (py::isinstance<Device>(value)) return value.cast<Device>();
  if (PyUnicode_Check(value.ptr())) {
    // Factories are called with the same string again and again ('cuda'): the last one
    // parsed is kept (the GIL is held, so no lock is needed).
    static PyObject* last = nullptr;
    static Device last_device;
    if (last != nullptr && PyUnicode_Compare(last, value.ptr()) == 0) return last_device;
    const Device device = Unwrap(Device::Parse(value.cast<std::string>()));
    Py_XDECREF(last);
    last = value.inc_ref().ptr();
    last_device = device;
    return device;
  }
  // torch.device and the like print as their name.
  if (py::hasattr(value, "type") && py::hasattr(value, "index")) {
    absl::StatusOr<Device> parsed = Device::Parse(py::str(value).cast<std::string>());
    if (parsed.ok()) return *parsed;
  }
  ThrowValueError(absl::StrCat("not a device: ", Repr(value),
                               " (expected 'cpu', 'cuda', 'cuda:N' or a genesis.device)"));
}

DType ToDType(py::handle value) {
  if (py::isinstance<DType>(value)) return value.cast<DType>();
  if (value.ptr() == reinterpret_cast<PyObject*>(&PyFloat_Type)) return DType::kFloat32;
  if (value.ptr() == reinterpret_cast<PyObject*>(&PyBool_Type)) return DType::kBool;
  if (value.ptr() == reinterpret_cast<PyObject*>(&PyLong_Type)) return DType::kInt64;
  std::string name;
  if (py::isinstance<py::str>(value)) {
    name = value.cast<std::string>();
  } else if (py::hasattr(value, "name") && py::isinstance<py::str>(value.attr("name"))) {
    name = value.attr("name").cast<std::string>();  // numpy.dtype
  } else if (py::hasattr(value, "dtype") && !py::isinstance<py::str>(value.attr("dtype")) &&
             py::hasattr(value.attr("dtype"), "name")) {
    name = value.attr("dtype").attr("name").cast<std::string>();  // numpy.float32
  } else {
    name = py::str(value).cast<std::string>();
  }
  std::string_view view = name;
  if (view.substr(0, 6) == "torch.") view.remove_prefix(6);
  absl::StatusOr<DType> dtype = ParseDType(view);
  if (!dtype.ok()) {
    ThrowValueError(absl::StrCat("not a genesis dtype: ", Repr(value),
                                 " (bool, uint8, int8, int16, int32, int64, float16, "
                                 "bfloat16, float32, float64)"));
  }
  return *dtype;
}

std::vector<int64_t> ToShape(py::handle value) {
  std::vector<int64_t> shape;
  if (py::isinstance<py::tuple>(value) || py::isinstance<py::list>(value)) {
    for (py::handle item : value) shape.push_back(ToInt(item, "a shape's size"));
  } else {
    shape.push_back(ToInt(value, "a shape's size"));
  }
  return shape;
}

std::vector<int64_t> ToShape(const py::args& args) {
  if (args.size() == 1) return ToShape(py::handle(args[0]));
  std::vector<int64_t> shape;
  shape.reserve(args.size());
  for (py::handle item : args) shape.push_back(ToInt(item, "a shape's size"));
  return shape;
}

CUstream_st* ToStream(py::handle value) {
  if (value.is_none()) return nullptr;
  py::handle number = value;
  py::object held;
  if (!PyLong_Check(value.ptr())) {
    for (const char* attribute : {"cuda_stream", "ptr"}) {
      if (py::hasattr(value, attribute)) {
        held = value.attr(attribute);
        number = held;
        break;
      }
    }
  }
  const int64_t v = ToInt(number, "a stream");
  if (v < 0) ThrowValueError(absl::StrCat("not a CUDA stream: ", Repr(value)));
  return reinterpret_cast<CUstream_st*>(static_cast<uintptr_t>(v));
}

}  // namespace genesis::python
