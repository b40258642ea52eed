// The factories: empty, zeros, ones, full, arange, rand, randn, randint, and
// create_storage from Python data (nested lists, numbers, storages, DLPack producers).
#include <Python.h>

#include <cmath>
#include <cstdint>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>

#include "absl/strings/str_cat.h"
#include "genesis/core/status.h"
#include "genesis/core/dtype.h"
#include "genesis/storage/storage.h"
#include "python/src/arguments.h"
#include "python/src/bindings.h"
#include "python/src/errors.h"

namespace genesis::python {
namespace {

namespace py = pybind11;
using storage::Storage;
using storage::StorageOptions;

StorageOptions Options(bool pinned, size_t alignment, py::handle stream) {
  StorageOptions options;
  options.pinned = pinned;
  options.alignment = alignment;
  options.stream = ToStream(stream);
  return options;
}

// `s` converted to `dtype` and then placed on `device` with `options`, without the GIL;
// `s` itself when it already is all that.
Storage Place(const Storage& s, DType dtype, const Device& device, const StorageOptions& options) {
  return WithoutGil([&]() -> absl::StatusOr<Storage> {
    Storage typed = s;
    if (typed.dtype() != dtype) {
      GENESIS_ASSIGN_OR_RETURN(typed, typed.To(dtype));
    }
    if (device == typed.device() && options.pinned == typed.is_pinned() &&
        options.alignment == 0 && options.stream == typed.stream()) {
      return typed;
    }
    return typed.To(device, options);
  });
}

DType DTypeOr(py::handle dtype, DType otherwise) {
  return dtype.is_none() ? otherwise : ToDType(dtype);
}

// The keywords of empty, zeros and ones, read straight from the call's dict: pybind11's
// own keyword matching costs more than the allocation it precedes.
struct FactoryKeywords {
  DType dtype = DType::kFloat32;
  Device device;
  StorageOptions options;
};

FactoryKeywords ReadKeywords(const py::kwargs& keywords, const char* function) {
  FactoryKeywords k;
  if (keywords.empty()) return k;
  static PyObject* const kNames[] = {
      PyUnicode_InternFromString("dtype"), PyUnicode_InternFromString("device"),
      PyUnicode_InternFromString("pinned"), PyUnicode_InternFromString("alignment"),
      PyUnicode_InternFromString("stream")};
  PyObject* key = nullptr;
  PyObject* value = nullptr;
  Py_ssize_t position = 0;
  while (PyDict_Next(keywords.ptr(), &position, &key, &value)) {
    int which = 0;
    while (which < 5 && key != kNames[which] && PyUnicode_Compare(key, kNames[which]) != 0) {
      ++which;
    }
    const py::handle v(value);
    switch (which) {
      case 0: k.dtype = DTypeOr(v, DType::kFloat32); break;
      case 1: k.device = ToDevice(v); break;
      case 2: k.options.pinned = PyObject_IsTrue(value) == 1; break;
      case 3: k.options.alignment = v.cast<size_t>(); break;
      case 4: k.options.stream = ToStream(v); break;
      default:
        PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", function,
                     key);
        throw py::error_already_set();
    }
  }
  return k;
}

// The process's generator for rand, randn and randint (genesis.manual_seed sets it).
struct Generator {
  std::mutex mu;
  std::mt19937_64 engine{std::random_device{}()};
};
Generator& TheGenerator() {
  static auto* generator = new Generator;
  return *generator;
}

// A storage of `shape` whose elements `next()` draws (as doubles, converted to dtype).
template <typename Draw>
Storage Random(const std::vector<int64_t>& shape, DType dtype, const Device& device,
               const StorageOptions& options, Draw draw) {
  Storage host = Unwrap(storage::Empty(shape, DType::kFloat64, Device::Cpu()));
  {
    Generator& g = TheGenerator();
    std::lock_guard<std::mutex> lock(g.mu);
    auto* p = static_cast<double*>(host.data_ptr());
    for (int64_t i = 0; i < host.numel(); ++i) p[i] = draw(g.engine);
  }
  return Place(host, dtype, device, options);
}

// Python data as a flat row-major list of values and a shape; the dtype it asks for:
// bool if every value is, int64 if every value is an int, else float32 (as PyTorch).
struct Flat {
  std::vector<int64_t> shape;
  std::vector<double> floats;
  std::vector<int64_t> ints;
  bool any_float = false;
  bool all_bool = true;
  bool shape_known = false;
};

void Walk(py::handle data, size_t depth, Flat& flat, py::handle whole) {
  const bool sequence = py::isinstance<py::list>(data) || py::isinstance<py::tuple>(data);
  if (!flat.shape_known) {
    if (sequence) {
      flat.shape.push_back(static_cast<int64_t>(py::len(data)));
    } else {
      flat.shape_known = true;
    }
  }
  if (sequence) {
    if (depth >= flat.shape.size() ||
        static_cast<int64_t>(py::len(data)) != flat.shape[depth]) {
      ThrowValueError(absl::StrCat("create_storage: data is not rectangular: ",
                                   py::repr(data).cast<std::string>(), " at depth ", depth,
                                   " of ", py::repr(whole).cast<std::string>().substr(0, 200)));
    }
    if (py::len(data) == 0) flat.shape_known = true;
    for (py::handle item : data) Walk(item, depth + 1, flat, whole);
    return;
  }
  if (depth != flat.shape.size()) {
    ThrowValueError(absl::StrCat("create_storage: data is not rectangular: a number (",
                                 py::repr(data).cast<std::string>(), ") at depth ", depth,
                                 " where lists of depth ", flat.shape.size(), " were seen"));
  }
  if (PyBool_Check(data.ptr())) {
    flat.ints.push_back(data.ptr() == Py_True);
    flat.floats.push_back(data.ptr() == Py_True);
    return;
  }
  flat.all_bool = false;
  if (PyLong_Check(data.ptr())) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(data.ptr(), &overflow);
    if (overflow != 0) {
      ThrowValueError(absl::StrCat("create_storage: ", py::repr(data).cast<std::string>(),
                                   " does not fit in int64"));
    }
    flat.ints.push_back(v);
    flat.floats.push_back(static_cast<double>(v));
    return;
  }
  const double v = PyFloat_AsDouble(data.ptr());
  if (v == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    ThrowValueError(absl::StrCat("create_storage: ", py::repr(data).cast<std::string>(),
                                 " is not a number"));
  }
  flat.any_float = true;
  flat.floats.push_back(v);
  flat.ints.push_back(0);  // Unused once a float is seen.
}

Storage CreateFromData(py::handle data, py::handle device_arg, py::handle dtype_arg, bool pinned,
                       py::handle stream) {
  const Device device = ToDevice(device_arg);
  const StorageOptions options = Options(pinned, 0, stream);
  Storage source;
  if (py::isinstance<Storage>(data)) {
    source = data.cast<Storage>();
  } else if (py::hasattr(data, "__dlpack__")) {
    source = py::module_::import("genesis._genesis").attr("from_dlpack")(data).cast<Storage>();
  } else {
    Flat flat;
    Walk(data, 0, flat, data);
    const DType natural = flat.any_float ? DType::kFloat32
                          : flat.all_bool && !flat.ints.empty() ? DType::kBool
                          : flat.ints.empty() ? DType::kFloat32
                                              : DType::kInt64;
    const DType dtype = DTypeOr(dtype_arg, natural);
    // Integers stay exact (int64) until converted; everything else goes through double.
    const bool exact = !flat.any_float && IsInteger(dtype);
    Storage host = exact ? Unwrap(storage::CreateStorage(flat.ints.data(), flat.shape,
                                                         DType::kInt64, Device::Cpu()))
                         : Unwrap(storage::CreateStorage(flat.floats.data(), flat.shape,
                                                         DType::kFloat64, Device::Cpu()));
    return Place(host, dtype, device, options);
  }
  const DType dtype = DTypeOr(dtype_arg, source.dtype());
  // Always a copy, even of a storage already on the device.
  Storage moved = WithoutGil([&] { return source.To(device, options); });
  return Place(moved, dtype, device, options);
}

}  // namespace

void RegisterFactories(py::module_& m) {
  // Each factory takes the shape as separate ints or one tuple or list.
  m.def(
      "empty",
      [](py::args shape, py::kwargs keywords) {
        const FactoryKeywords k = ReadKeywords(keywords, "empty");
        return Unwrap(storage::Empty(ToShape(shape), k.dtype, k.device, k.options));
      },
      "empty(*shape, dtype=float32, device=None, pinned=False, alignment=0, stream=None): "
      "a storage of the shape with uninitialised elements, drawn from the device's pool.");
  m.def(
      "full",
      [](py::handle shape, double value, py::handle dtype, py::handle device, bool pinned,
         size_t alignment, py::handle stream) {
        return Unwrap(storage::Full(ToShape(shape), value, DTypeOr(dtype, DType::kFloat32),
                                    ToDevice(device), Options(pinned, alignment, stream)));
      },
      py::arg("shape"), py::arg("fill_value"), py::kw_only(), py::arg("dtype") = py::none(),
      py::arg("device") = py::none(), py::arg("pinned") = false, py::arg("alignment") = 0,
      py::arg("stream") = py::none(), "A storage of the shape with every element fill_value.");
  for (const auto& [name, value] : {std::pair{"zeros", 0.0}, std::pair{"ones", 1.0}}) {
    const double fill = value;
    const char* function = name;
    m.def(
        name,
        [fill, function](py::args shape, py::kwargs keywords) {
          const FactoryKeywords k = ReadKeywords(keywords, function);
          return Unwrap(storage::Full(ToShape(shape), fill, k.dtype, k.device, k.options));
        },
        fill == 0 ? "zeros(*shape, dtype=float32, device=None, pinned=False, alignment=0, "
                    "stream=None): a storage of the shape filled with 0."
                  : "ones(*shape, dtype=float32, device=None, pinned=False, alignment=0, "
                    "stream=None): a storage of the shape filled with 1.");
  }
  m.def(
      "arange",
      [](double start, py::handle stop, double step, py::handle dtype, py::handle device) {
        double begin = start, end = 0;
        if (stop.is_none()) {
          end = start;
          begin = 0;
        } else {
          end = stop.cast<double>();
        }
        return Unwrap(storage::Arange(begin, end, step, DTypeOr(dtype, DType::kInt64),
                                      ToDevice(device)));
      },
      py::arg("start"), py::arg("stop") = py::none(), py::arg("step") = 1.0, py::kw_only(),
      py::arg("dtype") = py::none(), py::arg("device") = py::none(),
      "Like numpy.arange: start, start + step, ... below stop (arange(n) is 0 .. n - 1); "
      "int64 by default.");
  m.def(
      "rand",
      [](py::args shape, py::handle dtype, py::handle device) {
        std::uniform_real_distribution<double> uniform(0.0, 1.0);
        return Random(ToShape(shape), DTypeOr(dtype, DType::kFloat32), ToDevice(device), {},
                      [&](std::mt19937_64& e) { return uniform(e); });
      },
      py::kw_only(), py::arg("dtype") = py::none(), py::arg("device") = py::none(),
      "Uniform values in [0, 1).");
  m.def(
      "randn",
      [](py::args shape, py::handle dtype, py::handle device) {
        std::normal_distribution<double> normal(0.0, 1.0);
        return Random(ToShape(shape), DTypeOr(dtype, DType::kFloat32), ToDevice(device), {},
                      [&](std::mt19937_64& e) { return normal(e); });
      },
      py::kw_only(), py::arg("dtype") = py::none(), py::arg("device") = py::none(),
      "Standard normal values.");
  m.def(
      "randint",
      [](int64_t low, py::handle high, py::handle shape, py::handle dtype, py::handle device) {
        int64_t lo = low, hi = 0;
        if (high.is_none()) {
          hi = low;
          lo = 0;
        } else {
          hi = high.cast<int64_t>();
        }
        if (hi <= lo) {
          ThrowValueError(absl::StrCat("randint: high (", hi, ") must exceed low (", lo, ")"));
        }
        std::uniform_int_distribution<int64_t> uniform(lo, hi - 1);
        return Random(ToShape(shape), DTypeOr(dtype, DType::kInt64), ToDevice(device), {},
                      [&](std::mt19937_64& e) { return static_cast<double>(uniform(e)); });
      },
      py::arg("low"), py::arg("high") = py::none(), py::arg("size") = py::tuple(),
      py::kw_only(), py::arg("dtype") = py::none(), py::arg("device") = py::none(),
      "Integers in [low, high) (randint(high, size=...) draws from [0, high)); int64.");
  m.def(
      "manual_seed",
      [](uint64_t seed) {
        Generator& g = TheGenerator();
        std::lock_guard<std::mutex> lock(g.mu);
        g.engine.seed(seed);
      },
      py::arg("seed"), "Seeds the generator of rand, randn and randint.");
  m.def("create_storage", &CreateFromData, py::arg("data"), py::arg("device") = py::none(),
        py::arg("dtype") = py::none(), py::kw_only(), py::arg("pinned") = false,
        py::arg("stream") = py::none(),
        "A storage holding a copy of `data` (a number, nested lists or tuples, a Storage, or "
        "anything with __dlpack__) on `device`: bool, int64 or float32 as the data are, "
        "unless dtype says otherwise. ValueError for data that is not rectangular.");
}

}  // namespace genesis::python
