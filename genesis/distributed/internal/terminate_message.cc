#include "genesis/distributed/internal/terminate_message.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <typeinfo>

#include <cxxabi.h>

namespace genesis::distributed::internal {
namespace {

std::terminate_handler previous_handler = nullptr;

void SayWhyThenTerminate() {
  const std::type_info* type = abi::__cxa_current_exception_type();
  if (type != nullptr) {
    const char* what = "";
    try {
      std::rethrow_exception(std::current_exception());
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    std::fprintf(stderr, "genesis: terminating (pid %d): uncaught exception %s: %s\n",
                 static_cast<int>(getpid()), type->name(), what);
  } else {
    std::fprintf(stderr, "genesis: terminating (pid %d): std::terminate without an exception\n",
                 static_cast<int>(getpid()));
  }
  std::fflush(stderr);
  if (previous_handler != nullptr) previous_handler();
  std::abort();
}

}  // namespace

void SayWhyWhenTerminating() {
  static const bool once = [] {
    previous_handler = std::set_terminate(SayWhyThenTerminate);
    return true;
  }();
  (void)once;
}

}  // namespace genesis::distributed::internal
