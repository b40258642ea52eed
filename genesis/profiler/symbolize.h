// Turning recorded return addresses into names, once per report (never while recording).
//
// Function names come from absl::Symbolize (demangled); file:line from `addr2line`
// (binutils) when it is installed and the binary has debug information, else they are
// left out. A call site is the first frame outside the memory system (the pools, the
// profiler, the storage layer, abseil and the standard library).
#ifndef GENESIS_PROFILER_SYMBOLIZE_H_
#define GENESIS_PROFILER_SYMBOLIZE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace genesis::profiler {

struct Frame {
  uintptr_t pc = 0;
  // The demangled function, or "0x..." if unknown.
  std::string function;
  // Empty / 0 where unknown.
  std::string file;
  int line = 0;
  // "function (file:line)" or "function".
  std::string ToString() const;
};

// Resolves return addresses. Caches each address, so a report pays once per distinct
// address.
class Symbolizer {
 public:
  // `file_lines`: ask addr2line for file:line (one process per report).
  explicit Symbolizer(bool file_lines = true) : file_lines_(file_lines) {}

  // Every distinct address of `stacks` resolved in one batch.
  void Resolve(const std::vector<std::vector<uintptr_t>>& stacks);
  // The frames of `stack`, innermost first (resolving what Resolve did not).
  std::vector<Frame> Frames(const std::vector<uintptr_t>& stack);
  // The first frame of `stack` outside the memory system (or its outermost frame).
  Frame CallSite(const std::vector<uintptr_t>& stack);

 private:
  const Frame& Lookup(uintptr_t pc);
  bool file_lines_;
  absl::flat_hash_map<uintptr_t, Frame> cache_;
};

// True if `function` belongs to the memory system (see the top of this file).
bool IsMemorySystemFrame(const std::string& function);

}  // namespace genesis::profiler

#endif  // GENESIS_PROFILER_SYMBOLIZE_H_
