// Error-handling helpers shared by every genesis library.
//
// genesis reports recoverable errors as absl::Status / absl::StatusOr<T>. This
// header adds the small amount of glue that makes that pleasant:
//
//   absl::StatusOr<Tensor> Load(std::string_view path) {
//     GENESIS_ASSIGN_OR_RETURN(auto bytes, ReadFile(path));
//     GENESIS_RETURN_IF_ERROR(CheckHeader(bytes));
//     ...
//   }
//
//   return Annotate(status, absl::StrCat("while loading '", path, "'"));
//
// Code that must surface errors as C++ exceptions (for example a Python
// binding layer that translates exceptions) uses ThrowIfError() or
// ValueOrThrow(), which throw StatusError. Those are the only places genesis
// throws; everything else returns a status.

#ifndef GENESIS_CORE_STATUS_H_
#define GENESIS_CORE_STATUS_H_

#include <stdexcept>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Evaluates `expr`, which must yield an absl::Status, and returns it from the
// enclosing function if it is not OK. The enclosing function may return
// absl::Status or any absl::StatusOr<T>.
#define GENESIS_RETURN_IF_ERROR(expr)                      \
  do {                                                     \
    if (::absl::Status genesis_status_macro_tmp_ = (expr); \
        !genesis_status_macro_tmp_.ok()) {                 \
      return genesis_status_macro_tmp_;                    \
    }                                                      \
  } while (false)

// Evaluates `expr` (everything after the first comma, so template arguments
// with commas are fine), which must yield an absl::StatusOr<T>. If it holds an
// error, returns that status from the enclosing function; otherwise moves the
// value into `lhs`. `lhs` is either a declaration (`auto x`, `const int y`) or
// an existing lvalue (`x`, `obj.field`). A comma in `lhs` would split the
// macro arguments, so a type containing one needs an alias, and structured
// bindings are not supported.
//
// The macro expands to several statements, because a declaration in `lhs`
// must stay visible after it: do not use it as the unbraced body of an `if`,
// and use it at most once per source line (the temporary is named after
// __LINE__).
#define GENESIS_ASSIGN_OR_RETURN(lhs, ...)                                \
  GENESIS_STATUS_MACRO_IMPL_ASSIGN_OR_RETURN_(                            \
      GENESIS_STATUS_MACRO_CONCAT_(genesis_statusor_tmp_, __LINE__), lhs, \
      __VA_ARGS__)

// Implementation details of the macros above; not for direct use.
#define GENESIS_STATUS_MACRO_CONCAT_INNER_(a, b) a##b
#define GENESIS_STATUS_MACRO_CONCAT_(a, b) \
  GENESIS_STATUS_MACRO_CONCAT_INNER_(a, b)
#define GENESIS_STATUS_MACRO_IMPL_ASSIGN_OR_RETURN_(statusor, lhs, ...) \
  auto statusor = (__VA_ARGS__);                                        \
  if (!statusor.ok()) {                                                 \
    return ::std::move(statusor).status();                              \
  }                                                                     \
  lhs = *::std::move(statusor)

namespace genesis {

// Returns `status` with "`context`: " prepended to its message, keeping the
// code and any payloads, so callers up the stack can tell where an error
// came from without losing what kind of error it is. An OK status is
// returned unchanged (there is nothing to annotate), as is any status when
// `context` is empty. If the original message is empty the result's message
// is just `context`.
absl::Status Annotate(const absl::Status& status, std::string_view context);

// The exception thrown by ThrowIfError() and ValueOrThrow(). It carries the
// full absl::Status so a handler can recover the code and payloads, and
// what() returns status().ToString().
class StatusError : public std::runtime_error {
 public:
  // `status` should not be OK. An OK status is replaced by an INTERNAL error
  // saying so, so that a caught StatusError never claims success.
  explicit StatusError(absl::Status status);

  // The error this exception was thrown for; never OK.
  const absl::Status& status() const noexcept { return status_; }

 private:
  struct NonOkTag {};
  StatusError(absl::Status non_ok, NonOkTag);

  absl::Status status_;
};

// Throws StatusError(status) if `status` is not OK; otherwise does nothing.
void ThrowIfError(const absl::Status& status);

// Returns the value held by `status_or`, or throws StatusError carrying its
// status if it holds an error.
template <class T>
T ValueOrThrow(absl::StatusOr<T> status_or) {
  ThrowIfError(status_or.status());
  return *std::move(status_or);
}

}  // namespace genesis

#endif  // GENESIS_CORE_STATUS_H_
