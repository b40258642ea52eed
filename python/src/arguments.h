// Reading Python arguments as genesis values: devices, dtypes, shapes and streams, with
// a ValueError naming the value when one does not parse.
#ifndef GENESIS_PYTHON_SRC_ARGUMENTS_H_
#define GENESIS_PYTHON_SRC_ARGUMENTS_H_

#include <cstdint>
#include <vector>

#include <pybind11/pybind11.h>

#include "genesis/core/device.h"
#include "genesis/core/dtype.h"

struct CUstream_st;

namespace genesis::python {

// A genesis.Device, a string ("cpu", "cuda", "cuda:1") or None (the CPU). Says nothing
// about whether a CUDA device exists (the pools check that when memory is drawn).
Device ToDevice(pybind11::handle value);

// A genesis dtype, its name ("float32", "bfloat16"), Python's bool, int (int64) or
// float (float32), or anything whose `name` or str() is a dtype name (NumPy's dtypes,
// "torch.float16").
DType ToDType(pybind11::handle value);

// A shape from factory arguments: (2, 3), [2, 3], 2, 3 (several ints) or an empty
// tuple (a scalar). Every entry an int; negative sizes are left to the storage layer,
// which names them.
std::vector<int64_t> ToShape(const pybind11::args& args);
std::vector<int64_t> ToShape(pybind11::handle value);

// A CUDA stream given as an integer (the cudaStream_t's address; 0 is the legacy
// default stream) or None (0); an object with `cuda_stream` or `ptr` (PyTorch's and
// CuPy's streams) is read through it. ValueError for a negative or non-integer value.
CUstream_st* ToStream(pybind11::handle value);

}  // namespace genesis::python

#endif  // GENESIS_PYTHON_SRC_ARGUMENTS_H_
