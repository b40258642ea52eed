// The parts of the extension module genesis._genesis, each registered by one file when
// the module is imported (module.cc calls them in this order: types before their users).
#ifndef GENESIS_PYTHON_SRC_BINDINGS_H_
#define GENESIS_PYTHON_SRC_BINDINGS_H_

#include <pybind11/pybind11.h>

namespace genesis::python {

void RegisterTypes(pybind11::module_& m);      // dtype, Device (types.cc)
void RegisterStorage(pybind11::module_& m);    // Storage and its methods (storage_py.cc)
void RegisterDLPack(pybind11::module_& m);     // __dlpack__, from_dlpack (dlpack_py.cc)
void RegisterFactories(pybind11::module_& m);  // empty, zeros, ..., create_storage
void RegisterCopies(pybind11::module_& m);     // copy_storage, batch_copy (copy_py.cc)
void RegisterMemory(pybind11::module_& m);     // pools' statistics (memory_py.cc)
void RegisterProfiler(pybind11::module_& m);   // ProfileMemory (profiler_py.cc)
void RegisterDistributed(pybind11::module_& m);  // process groups (distributed_py.cc)

}  // namespace genesis::python

#endif  // GENESIS_PYTHON_SRC_BINDINGS_H_
