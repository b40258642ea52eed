// genesis.Storage: description, views, copies, conversion to Python lists and the
// NumPy / CUDA array interfaces.
#include <Python.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "genesis/core/device.h"
#include "genesis/core/dtype.h"
#include "genesis/core/half.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/storage/storage.h"
#include "python/src/arguments.h"
#include "python/src/bindings.h"
#include "python/src/errors.h"

namespace genesis::python {
namespace {

namespace py = pybind11;
using storage::Storage;

py::tuple ToTuple(absl::Span<const int64_t> values) {
  py::tuple t(values.size());
  for (size_t i = 0; i < values.size(); ++i) t[i] = py::int_(values[i]);
  return t;
}

// The element at `p` as a Python number.
py::object Element(const char* p, DType dtype) {
  switch (dtype) {
    case DType::kBool: return py::bool_(*p != 0);
    case DType::kUInt8: return py::int_(*reinterpret_cast<const uint8_t*>(p));
    case DType::kInt8: return py::int_(*reinterpret_cast<const int8_t*>(p));
    case DType::kInt16: return py::int_(*reinterpret_cast<const int16_t*>(p));
    case DType::kInt32: return py::int_(*reinterpret_cast<const int32_t*>(p));
    case DType::kInt64: return py::int_(*reinterpret_cast<const int64_t*>(p));
    case DType::kFloat32: return py::float_(*reinterpret_cast<const float*>(p));
    case DType::kFloat64: return py::float_(*reinterpret_cast<const double*>(p));
    default: break;  // Half types are converted to float32 before.
  }
  ThrowValueError(absl::StrCat("no Python number for ", std::string(DTypeName(dtype))));
}

py::object Nest(const char*& p, DType dtype, absl::Span<const int64_t> shape) {
  if (shape.empty()) {
    py::object e = Element(p, dtype);
    p += ItemSize(dtype);
    return e;
  }
  py::list list(shape[0]);
  for (int64_t i = 0; i < shape[0]; ++i) list[i] = Nest(p, dtype, shape.subspan(1));
  return list;
}

// The view's elements as (nested) Python lists; a number for a 0-d storage.
py::object ToList(const Storage& s) {
  Storage host = s;
  if (s.dtype() == DType::kFloat16 || s.dtype() == DType::kBFloat16) {
    host = Unwrap(s.To(DType::kFloat32));
  }
  std::vector<char> bytes(host.nbytes());
  WithoutGil([&] { return host.CopyToHost(bytes.data(), bytes.size()); });
  const char* p = bytes.data();
  return Nest(p, host.dtype(), host.shape());
}

[[noreturn]] void ThrowIndexError(const std::string& message) {
  PyErr_SetString(PyExc_IndexError, message.c_str());
  throw py::error_already_set();
}

// Basic indexing: ints select (removing the dimension), slices with a positive step
// keep it. Every result is a view.
Storage Index(const Storage& s, py::handle key) {
  std::vector<py::handle> keys;
  if (py::isinstance<py::tuple>(key)) {
    for (py::handle k : key) keys.push_back(k);
  } else {
    keys.push_back(key);
  }
  if (static_cast<int>(keys.size()) > s.rank()) {
    ThrowIndexError(absl::StrCat("too many indices (", keys.size(), ") for ", s.ToString()));
  }
  Storage r = s;
  int dim = 0;
  for (py::handle k : keys) {
    const int64_t size = r.shape()[dim];
    if (PyLong_Check(k.ptr()) && !PyBool_Check(k.ptr())) {
      int64_t i = k.cast<int64_t>();
      if (i < -size || i >= size) {
        ThrowIndexError(absl::StrCat("index ", i, " is out of range for dimension ", dim,
                                     " of size ", size));
      }
      r = Unwrap(r.Select(dim, i < 0 ? i + size : i));
    } else if (PySlice_Check(k.ptr())) {
      Py_ssize_t start = 0, stop = 0, step = 0;
      if (PySlice_Unpack(k.ptr(), &start, &stop, &step) < 0) throw py::error_already_set();
      if (step <= 0) {
        ThrowValueError(absl::StrCat("slice step must be positive, not ", step));
      }
      PySlice_AdjustIndices(size, &start, &stop, step);
      r = Unwrap(r.Slice(dim, start, std::max<int64_t>(start, stop), step));
      ++dim;
    } else {
      ThrowValueError(absl::StrCat("index must be an int or a slice, not ",
                                   py::repr(k).cast<std::string>()));
    }
  }
  return r;
}

// NumPy's type string for `dtype`; bfloat16 has none.
std::string TypeString(DType dtype) {
  switch (dtype) {
    case DType::kBool: return "|b1";
    case DType::kUInt8: return "|u1";
    case DType::kInt8: return "|i1";
    case DType::kInt16: return "<i2";
    case DType::kInt32: return "<i4";
    case DType::kInt64: return "<i8";
    case DType::kFloat16: return "<f2";
    case DType::kFloat32: return "<f4";
    case DType::kFloat64: return "<f8";
    case DType::kBFloat16: break;
  }
  PyErr_SetString(PyExc_TypeError,
                  "bfloat16 has no array-interface type string; use DLPack (from_dlpack)");
  throw py::error_already_set();
}

// The array interface (version 3) both NumPy's and CUDA's forms share.
py::dict ArrayInterface(const Storage& s) {
  py::dict d;
  d["shape"] = ToTuple(s.shape());
  d["typestr"] = TypeString(s.dtype());
  d["data"] = py::make_tuple(reinterpret_cast<uintptr_t>(s.data_ptr()), s.is_read_only());
  d["version"] = 3;
  if (s.is_contiguous()) {
    d["strides"] = py::none();
  } else {
    std::vector<int64_t> bytes;
    for (int64_t stride : s.strides()) bytes.push_back(stride * static_cast<int64_t>(s.itemsize()));
    d["strides"] = ToTuple(bytes);
  }
  return d;
}

[[noreturn]] void ThrowAttributeError(const std::string& message) {
  PyErr_SetString(PyExc_AttributeError, message.c_str());
  throw py::error_already_set();
}

py::dict PoolInfo(const Storage& s) {
  py::dict info;
  memory::CachingAllocator* pool = s.pool();
  info["pool"] = pool == nullptr ? py::object(py::none())
                                 : py::object(py::str(s.is_pinned() ? "pinned" : s.device().ToString()));
  info["external"] = pool == nullptr;
  info["block"] = reinterpret_cast<uintptr_t>(s.pool_block());
  info["block_bytes"] = pool == nullptr ? 0 : pool->AllocationSize(s.pool_block());
  info["size_bytes"] = s.size_bytes();
  info["alignment"] = s.alignment();
  info["pinned"] = s.is_pinned();
  info["stream"] = reinterpret_cast<uintptr_t>(s.stream());
  info["shared_by"] = s.use_count();
  return info;
}

// Copies `src`'s elements into the view `dst`, converting them if the dtypes differ,
// without the GIL.
void CopyInto(Storage& dst, const Storage& src) {
  WithoutGil([&] { return src.dtype() == dst.dtype() ? dst.CopyFrom(src) : dst.ConvertFrom(src); });
}

// Copies `src` (a Storage, or a number to fill with) into the view `dst`.
void Assign(Storage& dst, py::handle src) {
  if (py::isinstance<Storage>(src)) {
    CopyInto(dst, src.cast<const Storage&>());
    return;
  }
  if (PyFloat_Check(src.ptr()) || PyLong_Check(src.ptr())) {
    ThrowIfError(dst.Fill(src.cast<double>()));
    return;
  }
  ThrowValueError(absl::StrCat("cannot copy ", py::repr(src).cast<std::string>(),
                               " into a storage (a Storage or a number)"));
}

std::vector<int> ToDims(const py::args& args) {
  std::vector<int> dims;
  for (int64_t d : ToShape(args)) dims.push_back(static_cast<int>(d));
  return dims;
}

}  // namespace

void RegisterStorage(py::module_& m) {
  py::class_<Storage>(m, "Storage",
                      "A typed buffer on a device seen through a view (shape, strides, "
                      "offset); copies share the memory, views keep it alive.")
      // ---- Description.
      .def_property_readonly("shape", [](const Storage& s) { return ToTuple(s.shape()); })
      .def_property_readonly("strides", [](const Storage& s) { return ToTuple(s.strides()); },
                             "In elements, like PyTorch's stride().")
      .def_property_readonly("offset", &Storage::offset, "The view's first element, in elements.")
      .def_property_readonly("dtype", &Storage::dtype)
      .def_property_readonly("device", &Storage::device)
      .def_property_readonly("ndim", &Storage::rank)
      .def_property_readonly("itemsize", &Storage::itemsize)
      .def_property_readonly("nbytes", &Storage::nbytes, "Bytes of the view's elements.")
      .def_property_readonly("is_pinned", &Storage::is_pinned)
      .def_property_readonly("is_read_only", &Storage::is_read_only)
      .def_property_readonly(
          "data_ptr", [](const Storage& s) { return reinterpret_cast<uintptr_t>(s.data_ptr()); },
          "Address of the view's first element (a device address for CUDA storages).")
      .def("numel", &Storage::numel)
      .def("size_bytes", &Storage::size_bytes, "Bytes of the memory under the view.")
      .def("is_contiguous", &Storage::is_contiguous)
      .def("shares_memory_with", &Storage::SharesMemoryWith)
      .def("pool_info", &PoolInfo,
           "Where the memory came from: the pool, its block and size, alignment, stream.")
      .def("__repr__", &Storage::ToString)
      .def("__len__",
           [](const Storage& s) {
             if (s.rank() == 0) {
               PyErr_SetString(PyExc_TypeError, "len() of a 0-d storage");
               throw py::error_already_set();
             }
             return s.shape()[0];
           })
      // ---- Views.
      .def("__getitem__", &Index)
      .def("__setitem__",
           [](const Storage& s, py::handle key, py::handle value) {
             Storage view = Index(s, key);
             Assign(view, value);
           })
      .def("view", [](const Storage& s, py::args shape) { return Unwrap(s.Reshape(ToShape(shape))); },
           "The same memory with another shape (contiguous views only).")
      .def("reshape", [](const Storage& s, py::args shape) { return Unwrap(s.Reshape(ToShape(shape))); })
      .def("transpose", [](const Storage& s, int d0, int d1) { return Unwrap(s.Transpose(d0, d1)); })
      .def_property_readonly("T",
                             [](const Storage& s) {
                               std::vector<int> dims;
                               for (int d = s.rank() - 1; d >= 0; --d) dims.push_back(d);
                               return Unwrap(s.Permute(dims));
                             })
      .def("permute", [](const Storage& s, py::args dims) { return Unwrap(s.Permute(ToDims(dims))); })
      .def("slice",
           [](const Storage& s, int dim, int64_t start, int64_t stop, int64_t step) {
             return Unwrap(s.Slice(dim, start, stop, step));
           },
           py::arg("dim"), py::arg("start"), py::arg("stop"), py::arg("step") = 1)
      .def("select", [](const Storage& s, int dim, int64_t i) { return Unwrap(s.Select(dim, i)); })
      .def("expand", [](const Storage& s, py::args shape) { return Unwrap(s.Expand(ToShape(shape))); })
      .def("unsqueeze", [](const Storage& s, int dim) { return Unwrap(s.Unsqueeze(dim)); })
      .def("squeeze", [](const Storage& s, int dim) { return Unwrap(s.Squeeze(dim)); })
      // ---- Copies.
      .def("contiguous", [](const Storage& s) { return Unwrap(s.Contiguous()); },
           "This storage if contiguous, else a contiguous copy on the same device.")
      .def("clone", [](const Storage& s) { return Unwrap(s.Clone()); })
      .def(
          "to",
          [](const Storage& s, py::handle target, bool pinned, py::handle stream) {
            // A dtype: a genesis.dtype, a dtype's name, or a Python or NumPy type.
            // Otherwise a device: a genesis.Device, its name, or a torch.device.
            const bool is_dtype =
                py::isinstance<DType>(target) ||
                (py::isinstance<py::str>(target) ? ParseDType(target.cast<std::string>()).ok()
                                                 : !py::isinstance<Device>(target) &&
                                                       !py::hasattr(target, "index"));
            if (is_dtype) {
              const DType dtype = ToDType(target);
              return WithoutGil([&] { return s.To(dtype); });
            }
            const Device device = ToDevice(target);
            storage::StorageOptions options;
            options.pinned = pinned;
            options.stream = ToStream(stream);
            return WithoutGil([&] { return s.To(device, options); });
          },
          py::arg("target"), py::kw_only(), py::arg("pinned") = false, py::arg("stream") = py::none(),
          "A new contiguous storage on a device ('cpu', 'cuda:1', a genesis.Device) or of a "
          "dtype; always a copy.")
      .def("cpu",
           [](const Storage& s) {
             if (s.device().is_cpu()) return s;
             return WithoutGil([&] { return s.To(Device::Cpu()); });
           },
           "This storage if on the CPU, else a copy there.")
      // The in-place methods return the Python object itself, as PyTorch's do.
      .def("copy_",
           [](py::object self, const Storage& src) {
             CopyInto(self.cast<Storage&>(), src);
             return self;
           },
           py::arg("src"), "Copies (converting the dtype if it differs) src's elements into this view.")
      .def("fill_",
           [](py::object self, double value) {
             ThrowIfError(self.cast<Storage&>().Fill(value));
             return self;
           })
      .def("zero_",
           [](py::object self) {
             ThrowIfError(self.cast<Storage&>().Fill(0));
             return self;
           })
      .def("tolist", &ToList, "The elements as nested Python lists (a number for 0-d).")
      .def("item",
           [](const Storage& s) {
             if (s.numel() != 1) {
               ThrowValueError(absl::StrCat("item() needs one element, ", s.ToString(), " has ",
                                            s.numel()));
             }
             return ToList(Unwrap(s.Reshape({})));
           })
      .def("synchronize",
           [](const Storage& s) {
             WithoutGil([&] { return s.Synchronize(); });
           },
           "Waits for the work queued on the storage's stream.")
      .def("record_stream",
           [](const Storage& s, py::handle stream) { ThrowIfError(s.RecordStream(ToStream(stream))); },
           "Marks the memory as used by work on `stream` (reused only after it finishes).")
      // ---- Interfaces of other libraries.
      .def_property_readonly("__array_interface__",
                             [](const Storage& s) {
                               if (!s.device().is_cpu()) {
                                 ThrowAttributeError("__array_interface__ is for CPU storages");
                               }
                               return ArrayInterface(s);
                             })
      .def_property_readonly("__cuda_array_interface__", [](const Storage& s) {
        if (!s.device().is_cuda()) ThrowAttributeError("__cuda_array_interface__ is for CUDA storages");
        py::dict d = ArrayInterface(s);
        // 0 is not allowed by the protocol: the legacy default stream is 1.
        const uintptr_t stream = reinterpret_cast<uintptr_t>(s.stream());
        d["stream"] = stream == 0 ? 1 : stream;
        return d;
      });
}

}  // namespace genesis::python
