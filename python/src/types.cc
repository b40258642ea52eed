// genesis.dtype (the element types) and genesis.Device.
#include <string>

#include <pybind11/operators.h>
#include <pybind11/pybind11.h>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "genesis/core/device.h"
#include "genesis/core/dtype.h"
#include "python/src/arguments.h"
#include "python/src/bindings.h"
#include "python/src/errors.h"

namespace genesis::python {

namespace py = pybind11;

void RegisterTypes(py::module_& m) {
  py::enum_<DType> dtype(m, "dtype", "An element type: genesis.float32, genesis.bfloat16, ...");
  for (DType t : kAllDTypes) {
    dtype.value(std::string(DTypeName(t)).c_str(), t);
    m.attr(std::string(DTypeName(t)).c_str()) = t;
  }
  dtype.def_property_readonly("itemsize", [](DType t) { return ItemSize(t); },
                              "Bytes per element.")
      .def_property_readonly("is_floating_point", [](DType t) { return IsFloatingPoint(t); })
      .def_property_readonly("name", [](DType t) { return std::string(DTypeName(t)); });
  // Replaced, not overloaded: py::enum_'s own __str__ and __repr__ would match first.
  dtype.attr("__str__") =
      py::cpp_function([](DType t) { return std::string(DTypeName(t)); }, py::is_method(dtype));
  dtype.attr("__repr__") = py::cpp_function(
      [](DType t) { return absl::StrCat("genesis.", std::string(DTypeName(t))); },
      py::is_method(dtype));

  py::class_<Device>(m, "Device", "A device: the CPU or cuda:N. genesis.device(...) makes one.")
      .def(py::init([](py::handle spec) { return ToDevice(spec); }), py::arg("spec"),
           "'cpu', 'cuda' (cuda:0) or 'cuda:N'; ValueError for anything else.")
      .def_property_readonly("type", [](const Device& d) { return d.is_cuda() ? "cuda" : "cpu"; })
      .def_property_readonly("index", &Device::index)
      .def_property_readonly("id", &Device::index, "The index (cuda:N's N; 0 for the CPU).")
      .def_property_readonly("is_cuda", &Device::is_cuda)
      .def_property_readonly("is_cpu", &Device::is_cpu)
      .def("__str__", &Device::ToString)
      .def("__repr__", [](const Device& d) { return absl::StrCat("device('", d.ToString(), "')"); })
      .def("__hash__", [](const Device& d) { return absl::HashOf(d); })
      .def("__eq__", [](const Device& a, py::handle b) {
        if (py::isinstance<Device>(b)) return a == b.cast<Device>();
        if (py::isinstance<py::str>(b)) {
          absl::StatusOr<Device> parsed = Device::Parse(b.cast<std::string>());
          return parsed.ok() && *parsed == a;
        }
        return false;
      })
      .def(py::pickle([](const Device& d) { return d.ToString(); },
                      [](const std::string& s) { return Unwrap(Device::Parse(s)); }));
}

}  // namespace genesis::python
