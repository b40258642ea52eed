#include "benchmarks/memory/foreign_allocators.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"

namespace genesis::memory {
namespace {

constexpr char kTunable[] = "glibc.rtld.optional_static_tls";

ForeignAllocator Load(const char* name, const char* library, const char* package) {
  ForeignAllocator a;
  a.name = name;
  a.library = library;
  a.package = package;
  void* const handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* const error = dlerror();
    const std::string why = error != nullptr ? error : "";
    a.error = why.find("cannot open shared object file") != std::string::npos || why.empty()
                  ? absl::StrCat("unavailable: no ", library, " (Debian package ", package, ")")
                  : absl::StrCat("unavailable: ", why);
    return a;
  }
  // dlsym on the handle looks in the library first: its own malloc and free.
  a.malloc = reinterpret_cast<void* (*)(size_t)>(dlsym(handle, "malloc"));
  a.free = reinterpret_cast<void (*)(void*)>(dlsym(handle, "free"));
  if (a.malloc == nullptr || a.free == nullptr) {
    a.error = absl::StrCat("unavailable: ", library, " has no malloc and free");
  }
  return a;
}

}  // namespace

const ForeignAllocator& Foreign(ForeignKind kind) {
  switch (kind) {
    case ForeignKind::kMimalloc: {
      static const ForeignAllocator* a =
          new ForeignAllocator(Load("mimalloc", "libmimalloc.so.2", "libmimalloc2.0"));
      return *a;
    }
    case ForeignKind::kJemalloc: {
      static const ForeignAllocator* a =
          new ForeignAllocator(Load("jemalloc", "libjemalloc.so.2", "libjemalloc2"));
      return *a;
    }
    case ForeignKind::kTcmalloc: {
      static const ForeignAllocator* a = new ForeignAllocator(
          Load("tcmalloc", "libtcmalloc_minimal.so.4", "libtcmalloc-minimal4"));
      return *a;
    }
  }
  std::abort();
}

void ReexecWithStaticTlsRoom(char** argv) {
  const char* const tunables = std::getenv("GLIBC_TUNABLES");
  const std::string before = tunables != nullptr ? tunables : "";
  if (before.find(kTunable) != std::string::npos) return;
  // 64 KiB: jemalloc 5.3 asks for a few KiB; the rest is room for the other two.
  const std::string after =
      absl::StrCat(before, before.empty() ? "" : ":", kTunable, "=65536");
  if (setenv("GLIBC_TUNABLES", after.c_str(), 1) != 0) return;
  execv("/proc/self/exe", argv);
  // Not re-executed: leave the environment as it was.
  if (tunables != nullptr) {
    setenv("GLIBC_TUNABLES", before.c_str(), 1);
  } else {
    unsetenv("GLIBC_TUNABLES");
  }
}

}  // namespace genesis::memory
