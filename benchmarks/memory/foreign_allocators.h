// Other general-purpose allocators as baselines for the host pool: mimalloc, jemalloc and
// tcmalloc, loaded at run time from the libraries of their Debian packages with dlopen
// (RTLD_LOCAL). Each one's malloc and free are called through pointers while the
// process's own malloc stays glibc's: linked in, any of them would become the malloc of
// the whole process, and only one could be measured per binary.
//
//   int main(int argc, char** argv) {
//     ReexecWithStaticTlsRoom(argv);  // First: jemalloc needs it (see below).
//     const ForeignAllocator& je = Foreign(ForeignKind::kJemalloc);
//     if (je.ok()) je.free(je.malloc(64));
//   }
#ifndef GENESIS_BENCHMARKS_MEMORY_FOREIGN_ALLOCATORS_H_
#define GENESIS_BENCHMARKS_MEMORY_FOREIGN_ALLOCATORS_H_

#include <cstddef>
#include <string>

namespace genesis::memory {

enum class ForeignKind { kMimalloc, kJemalloc, kTcmalloc };

struct ForeignAllocator {
  const char* name = "";     // "mimalloc".
  const char* library = "";  // "libmimalloc.so.2".
  const char* package = "";  // Its Debian package, "libmimalloc2.0".
  void* (*malloc)(size_t) = nullptr;
  void (*free)(void*) = nullptr;
  // Why it could not be loaded ("unavailable: ..."); empty when malloc and free are set.
  std::string error;
  bool ok() const { return error.empty(); }
};

// The allocator of `kind`, loaded on first use (thread-safe); never unloaded.
const ForeignAllocator& Foreign(ForeignKind kind);

// jemalloc's library keeps its thread state in initial-exec TLS, which a library loaded
// with dlopen gets only from glibc's spare static TLS, too small for it by default
// ("cannot allocate memory in static TLS block"). Call first thing in main: unless
// GLIBC_TUNABLES already sets glibc.rtld.optional_static_tls, it re-executes the program
// (same arguments, /proc/self/exe) once with that tunable raised. Returns if it did not
// re-execute (already set, or exec failed: jemalloc then reports itself unavailable).
void ReexecWithStaticTlsRoom(char** argv);

}  // namespace genesis::memory

#endif  // GENESIS_BENCHMARKS_MEMORY_FOREIGN_ALLOCATORS_H_
