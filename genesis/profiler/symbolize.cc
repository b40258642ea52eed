#include "genesis/profiler/symbolize.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <sstream>

#include "absl/debugging/symbolize.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"

namespace genesis::profiler {
namespace {

std::string FunctionName(uintptr_t pc) {
  char buf[1024];
  // A return address points after the call: pc - 1 lies in the calling line.
  if (absl::Symbolize(reinterpret_cast<void*>(pc - 1), buf, sizeof(buf))) return buf;
  return absl::StrCat("0x", absl::Hex(pc));
}

bool Addr2LineAvailable() {
  static const bool available = access("/usr/bin/addr2line", X_OK) == 0;
  return available;
}

// file:line of each pc (those addr2line knows), by object file, one process each.
void FileLines(const std::vector<uintptr_t>& pcs, absl::flat_hash_map<uintptr_t, Frame>* out) {
  std::map<std::string, std::vector<std::pair<uintptr_t, uintptr_t>>> by_object;
  for (uintptr_t pc : pcs) {
    Dl_info info;
    if (dladdr(reinterpret_cast<void*>(pc - 1), &info) == 0 || info.dli_fname == nullptr) {
      continue;
    }
    const auto base = reinterpret_cast<uintptr_t>(info.dli_fbase);
    std::string object = info.dli_fname;
    // The main program is named as the shell ran it; /proc/self/exe always opens.
    if (object.empty() || object.find('/') == std::string::npos) object = "/proc/self/exe";
    by_object[object].push_back({pc, pc - 1 - base});
  }
  for (const auto& [object, list] : by_object) {
    if (object.find('\'') != std::string::npos) continue;
    std::string cmd = absl::StrCat("/usr/bin/addr2line -e '", object, "'");
    for (const auto& [pc, offset] : list) absl::StrAppend(&cmd, " 0x", absl::Hex(offset));
    absl::StrAppend(&cmd, " 2>/dev/null");
    FILE* f = popen(cmd.c_str(), "r");
    if (f == nullptr) continue;
    std::string text;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, n);
    pclose(f);
    std::vector<std::string> lines = absl::StrSplit(text, '\n');
    for (size_t i = 0; i < list.size() && i < lines.size(); ++i) {
      // "file:line" or "file:line (discriminator n)"; "??:0" or "??:?" when unknown.
      std::string line = lines[i];
      if (size_t d = line.find(" ("); d != std::string::npos) line.resize(d);
      const size_t colon = line.rfind(':');
      if (colon == std::string::npos) continue;
      int number = 0;
      if (!absl::SimpleAtoi(line.substr(colon + 1), &number) || number <= 0) continue;
      std::string file = line.substr(0, colon);
      if (file.empty() || file == "??") continue;
      Frame& frame = (*out)[list[i].first];
      frame.file = std::move(file);
      frame.line = number;
    }
  }
}

}  // namespace

std::string Frame::ToString() const {
  if (file.empty()) return function;
  return absl::StrCat(function, " (", file, ":", line, ")");
}

bool IsMemorySystemFrame(const std::string& f) {
  for (const char* prefix :
       {"genesis::memory::", "genesis::profiler::", "genesis::storage::", "absl::",
        "std::", "__gnu_cxx::"}) {
    if (absl::StartsWith(f, prefix)) return true;
  }
  return false;
}

void Symbolizer::Resolve(const std::vector<std::vector<uintptr_t>>& stacks) {
  std::vector<uintptr_t> fresh;
  for (const auto& stack : stacks) {
    for (uintptr_t pc : stack) {
      if (cache_.contains(pc)) continue;
      Frame f;
      f.pc = pc;
      f.function = FunctionName(pc);
      cache_.emplace(pc, std::move(f));
      fresh.push_back(pc);
    }
  }
  if (file_lines_ && !fresh.empty() && Addr2LineAvailable()) FileLines(fresh, &cache_);
}

const Frame& Symbolizer::Lookup(uintptr_t pc) {
  if (!cache_.contains(pc)) Resolve({{pc}});
  return cache_.at(pc);
}

std::vector<Frame> Symbolizer::Frames(const std::vector<uintptr_t>& stack) {
  std::vector<Frame> out;
  for (uintptr_t pc : stack) out.push_back(Lookup(pc));
  return out;
}

Frame Symbolizer::CallSite(const std::vector<uintptr_t>& stack) {
  for (uintptr_t pc : stack) {
    const Frame& f = Lookup(pc);
    if (!IsMemorySystemFrame(f.function)) return f;
  }
  if (stack.empty()) return Frame{0, "(no call stack: record with stacks)", "", 0};
  return Lookup(stack.back());
}

}  // namespace genesis::profiler
