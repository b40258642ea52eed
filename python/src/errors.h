// How the extension module turns genesis's absl::Status errors into Python exceptions.
//
//   ResourceExhausted                 genesis.OutOfMemoryError (a MemoryError and a
//                                     RuntimeError, like torch.OutOfMemoryError)
//   InvalidArgument, OutOfRange       ValueError
//   DeadlineExceeded                  TimeoutError
//   Unimplemented                     NotImplementedError
//   NotFound                          FileNotFoundError
//   anything else                     RuntimeError
//
// The exception's message is the status's message, unchanged.
#ifndef GENESIS_PYTHON_SRC_ERRORS_H_
#define GENESIS_PYTHON_SRC_ERRORS_H_

#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include <pybind11/pybind11.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace genesis::python {

// Adds OutOfMemoryError to `module`. Called once, when the module is imported.
void RegisterErrors(pybind11::module_& module);

// Raises the Python exception for `status` (the table above) by throwing
// pybind11::error_already_set; returns if `status` is OK.
void ThrowIfError(const absl::Status& status);

// The value of `result`, or its error raised as above.
template <typename T>
T Unwrap(absl::StatusOr<T> result) {
  ThrowIfError(result.status());
  return *std::move(result);
}

// Runs `f` (returning absl::Status or absl::StatusOr<T>) with the GIL released, so that
// other Python threads run meanwhile, then raises its error (or returns its value) with
// the GIL held again. `f` must not touch Python objects.
template <typename F>
auto WithoutGil(F&& f) {
  using Result = std::invoke_result_t<F>;
  std::optional<Result> result;
  {
    pybind11::gil_scoped_release release;
    result.emplace(f());
  }
  if constexpr (std::is_same_v<Result, absl::Status>) {
    ThrowIfError(*result);
  } else {
    return Unwrap(*std::move(result));
  }
}

// Raises ValueError(message).
[[noreturn]] void ThrowValueError(const std::string& message);

}  // namespace genesis::python

#endif  // GENESIS_PYTHON_SRC_ERRORS_H_
