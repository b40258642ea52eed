// genesis._genesis: the extension module under the genesis Python package. Python code
// imports genesis, whose modules wrap what reads better in Python (genesis/__init__.py).
#include <pybind11/pybind11.h>

#include "python/src/bindings.h"
#include "python/src/errors.h"

PYBIND11_MODULE(_genesis, m) {
  m.doc() = "genesis's C++ storage and memory layer (use it through the genesis package).";
  genesis::python::RegisterErrors(m);
  genesis::python::RegisterTypes(m);
  genesis::python::RegisterStorage(m);
  genesis::python::RegisterDLPack(m);
  genesis::python::RegisterFactories(m);
  genesis::python::RegisterCopies(m);
  genesis::python::RegisterMemory(m);
  genesis::python::RegisterProfiler(m);
  genesis::python::RegisterDistributed(m);
}
