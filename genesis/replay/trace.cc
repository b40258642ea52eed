#include "genesis/replay/trace.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "genesis/core/absl_compat.h"

namespace genesis::replay {
namespace {

// Debian's abseil has its own string_view; StrCat takes only that one.

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

// Splits `line` at runs of whitespace into at most `max` fields; returns the
// count found (which may exceed `max`: then only the first `max` are stored).
int SplitFields(std::string_view line, std::string_view *fields, int max) {
  int n = 0;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && IsSpace(line[i])) ++i;
    if (i == line.size()) break;
    size_t start = i;
    while (i < line.size() && !IsSpace(line[i])) ++i;
    if (n < max) fields[n] = line.substr(start, i - start);
    ++n;
  }
  return n;
}

// Parses all of `s` as an unsigned number in `base`; false if anything is left
// over, nothing is there, or it overflows.
bool ParseUnsigned(std::string_view s, int base, uint64_t *value) {
  if (s.empty()) return false;
  const char *end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, *value, base);
  return ec == std::errc() && ptr == end;
}

// Hex with a 0x/0X prefix, else decimal.
bool ParseHexOrDecimal(std::string_view s, uint64_t *value) {
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    return ParseUnsigned(s.substr(2), 16, value);
  }
  return ParseUnsigned(s, 10, value);
}

std::string Hex(uint64_t v) { return absl::StrCat("0x", absl::Hex(v)); }

bool IsBlank(std::string_view s) {
  return std::all_of(s.begin(), s.end(), IsSpace);
}

// The step number of a comment (the text after '#') that is exactly
// "step <n>", surrounding whitespace aside; nullopt for any other comment.
std::optional<int> StepMarker(std::string_view comment) {
  std::string_view f[3];
  if (SplitFields(comment, f, 3) != 2 || f[0] != "step") return std::nullopt;
  uint64_t n = 0;
  if (!ParseUnsigned(f[1], 10, &n) || n > static_cast<uint64_t>(INT32_MAX)) {
    return std::nullopt;
  }
  return static_cast<int>(n);
}

absl::Status LineError(std::string_view name, int line, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(ToAbsl(name), ":", line, ": ", ToAbsl(what)));
}

absl::StatusOr<std::string> ReadFileBytes(const std::string &path) {
  FILE *f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    int err = errno;
    return absl::NotFoundError(
        absl::StrCat("cannot open trace '", path, "': ", std::strerror(err)));
  }
  std::string data;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) data.append(buf, n);
  bool failed = std::ferror(f) != 0;
  int err = errno;
  std::fclose(f);
  if (failed) {
    return absl::DataLossError(
        absl::StrCat("cannot read trace '", path, "': ", std::strerror(err)));
  }
  return data;
}

bool IsGzip(std::string_view data) {
  return data.size() >= 2 && static_cast<unsigned char>(data[0]) == 0x1f &&
         static_cast<unsigned char>(data[1]) == 0x8b;
}

// Inflates every gzip member of `data`. DataLoss naming `path` when the stream
// is truncated (ends before a member's trailer) or corrupt (bad data, header or
// CRC).
absl::StatusOr<std::string> Gunzip(std::string_view data, const std::string &path) {
  z_stream zs;
  std::memset(&zs, 0, sizeof(zs));
  if (inflateInit2(&zs, 15 + 16) != Z_OK) {
    return absl::InternalError(absl::StrCat("inflateInit2 failed for '", path, "'"));
  }
  std::string out;
  std::vector<char> buf(1 << 18);
  size_t pos = 0;  // Input consumed so far.
  bool member_done = false;
  while (true) {
    if (zs.avail_in == 0 && pos < data.size()) {
      size_t chunk = std::min<size_t>(data.size() - pos, size_t{1} << 30);
      zs.next_in = reinterpret_cast<Bytef *>(const_cast<char *>(data.data() + pos));
      zs.avail_in = static_cast<uInt>(chunk);
      pos += chunk;
    }
    zs.next_out = reinterpret_cast<Bytef *>(buf.data());
    zs.avail_out = static_cast<uInt>(buf.size());
    int rc = inflate(&zs, Z_NO_FLUSH);
    out.append(buf.data(), buf.size() - zs.avail_out);
    if (rc == Z_STREAM_END) {
      member_done = true;
      // Another member may follow (as `cat a.gz b.gz` makes); trailing zero
      // padding is ignored like gzip does.
      size_t remaining = zs.avail_in + (data.size() - pos);
      if (remaining == 0) break;
      std::string_view rest = data.substr(data.size() - remaining);
      if (!IsGzip(rest)) {
        if (std::all_of(rest.begin(), rest.end(), [](char c) { return c == 0; })) break;
        inflateEnd(&zs);
        return absl::DataLossError(absl::StrCat("corrupt gzip trace '", path,
                                                "': ", remaining,
                                                " bytes of garbage after the data"));
      }
      inflateReset(&zs);
      member_done = false;
      continue;
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR && zs.avail_in == 0 && pos == data.size()) {
      // No more input and the member has not ended.
      inflateEnd(&zs);
      return absl::DataLossError(absl::StrCat(
          "truncated gzip trace '", path, "': the compressed data ends after ",
          data.size(), " bytes, before the end of the stream (", out.size(),
          " bytes decompressed)"));
    }
    std::string msg = zs.msg != nullptr ? zs.msg : absl::StrCat("zlib error ", rc);
    inflateEnd(&zs);
    return absl::DataLossError(absl::StrCat("corrupt gzip trace '", path, "': ", msg,
                                            " (after ", out.size(),
                                            " bytes decompressed)"));
  }
  inflateEnd(&zs);
  if (!member_done) {
    return absl::DataLossError(absl::StrCat("truncated gzip trace '", path, "'"));
  }
  return out;
}

absl::StatusOr<std::string> Gzip(std::string_view data, const std::string &path) {
  z_stream zs;
  std::memset(&zs, 0, sizeof(zs));
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
                   Z_DEFAULT_STRATEGY) != Z_OK) {
    return absl::InternalError(absl::StrCat("deflateInit2 failed for '", path, "'"));
  }
  std::string out;
  std::vector<char> buf(1 << 18);
  size_t pos = 0;
  int rc = Z_OK;
  do {
    if (zs.avail_in == 0) {
      size_t chunk = std::min<size_t>(data.size() - pos, size_t{1} << 30);
      zs.next_in = reinterpret_cast<Bytef *>(const_cast<char *>(data.data() + pos));
      zs.avail_in = static_cast<uInt>(chunk);
      pos += chunk;
    }
    const int flush = pos == data.size() ? Z_FINISH : Z_NO_FLUSH;
    zs.next_out = reinterpret_cast<Bytef *>(buf.data());
    zs.avail_out = static_cast<uInt>(buf.size());
    rc = deflate(&zs, flush);
    if (rc == Z_STREAM_ERROR) {
      deflateEnd(&zs);
      return absl::InternalError(absl::StrCat("deflate failed for '", path, "'"));
    }
    out.append(buf.data(), buf.size() - zs.avail_out);
  } while (rc != Z_STREAM_END);
  deflateEnd(&zs);
  return out;
}

}  // namespace

std::string_view TraceActionName(TraceAction action) {
  switch (action) {
    case TraceAction::kAlloc:
      return "alloc";
    case TraceAction::kFreeRequested:
      return "free_requested";
    case TraceAction::kFreeCompleted:
      return "free_completed";
  }
  return "unknown";
}

absl::StatusOr<std::vector<TraceEvent>> ParseTrace(std::string_view text,
                                                   std::string_view name) {
  struct Live {
    uint64_t size;
    int line;
  };
  std::vector<TraceEvent> events;
  absl::flat_hash_map<uint64_t, Live> live;
  int line_no = 0;
  int step = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    if (size_t hash = line.find('#'); hash != std::string_view::npos) {
      if (std::optional<int> marked = StepMarker(line.substr(hash + 1));
          marked.has_value() && IsBlank(line.substr(0, hash))) {
        step = *marked;
      }
      line = line.substr(0, hash);
    }
    std::string_view f[4];
    const int n = SplitFields(line, f, 4);
    if (n == 0) continue;
    if (n != 4) {
      return LineError(name, line_no,
                       absl::StrCat("expected 4 fields (<action> <address> <size> "
                                    "<stream>), got ",
                                    n));
    }
    TraceEvent e;
    e.line = line_no;
    e.step = step;
    if (f[0] == "alloc") {
      e.action = TraceAction::kAlloc;
    } else if (f[0] == "free_requested") {
      e.action = TraceAction::kFreeRequested;
    } else if (f[0] == "free_completed") {
      e.action = TraceAction::kFreeCompleted;
    } else {
      return LineError(name, line_no,
                       absl::StrCat("unknown action '", ToAbsl(f[0]),
                                    "' (expected alloc, free_requested or "
                                    "free_completed)"));
    }
    if (!ParseHexOrDecimal(f[1], &e.address)) {
      return LineError(name, line_no,
                       absl::StrCat("bad address '", ToAbsl(f[1]),
                                    "' (expected hex 0x... or decimal, below 2^64)"));
    }
    if (!f[2].empty() && f[2][0] == '-') {
      return LineError(name, line_no, absl::StrCat("negative size '", ToAbsl(f[2]), "'"));
    }
    if (!ParseUnsigned(f[2], 10, &e.size)) {
      return LineError(
          name, line_no,
          absl::StrCat("bad size '", ToAbsl(f[2]), "' (expected decimal bytes)"));
    }
    if (e.size > kMaxTraceEventSize) {
      return LineError(name, line_no,
                       absl::StrCat("absurd size ", e.size, " bytes (more than 2^50 = ",
                                    kMaxTraceEventSize, "): corrupt trace?"));
    }
    if (!ParseHexOrDecimal(f[3], &e.stream)) {
      return LineError(name, line_no,
                       absl::StrCat("bad stream '", ToAbsl(f[3]),
                                    "' (expected a non-negative decimal or 0x... hex)"));
    }
    auto it = live.find(e.address);
    if (e.action == TraceAction::kAlloc) {
      if (it != live.end()) {
        return LineError(name, line_no,
                         absl::StrCat("alloc of ", Hex(e.address),
                                      ", which is still live (allocated at line ",
                                      it->second.line, ", not freed)"));
      }
      live.emplace(e.address, Live{e.size, line_no});
    } else {
      if (it == live.end()) {
        return LineError(name, line_no,
                         absl::StrCat(ToAbsl(TraceActionName(e.action)), " of ",
                                      Hex(e.address), ", which is not live"));
      }
      if (e.size != 0 && e.size != it->second.size) {
        return LineError(
            name, line_no,
            absl::StrCat(ToAbsl(TraceActionName(e.action)), " of ", Hex(e.address),
                         " with size ", e.size, ", but it was allocated with size ",
                         it->second.size, " at line ", it->second.line));
      }
      if (e.action == TraceAction::kFreeCompleted) live.erase(it);
    }
    events.push_back(e);
  }
  return events;
}

absl::StatusOr<std::vector<TraceEvent>> ReadTrace(const std::string &path) {
  absl::StatusOr<std::string> data = ReadFileBytes(path);
  if (!data.ok()) return data.status();
  if (IsGzip(*data)) {
    data = Gunzip(*data, path);
    if (!data.ok()) return data.status();
  }
  return ParseTrace(*data, path);
}

std::string FormatTrace(const std::vector<TraceEvent> &events) {
  std::string out;
  out.reserve(events.size() * 40);
  int step = 0;
  for (const TraceEvent &e : events) {
    if (e.step != step) {
      absl::StrAppend(&out, "# step ", e.step, "\n");
      step = e.step;
    }
    absl::StrAppend(&out, ToAbsl(TraceActionName(e.action)), " 0x", absl::Hex(e.address), " ",
                    e.size, " ", e.stream, "\n");
  }
  return out;
}

absl::Status WriteTrace(const std::string &path, const std::vector<TraceEvent> &events,
                        bool gzip) {
  std::string data = FormatTrace(events);
  if (gzip) {
    absl::StatusOr<std::string> z = Gzip(data, path);
    if (!z.ok()) return z.status();
    data = *std::move(z);
  }
  FILE *f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    int err = errno;
    return absl::UnavailableError(
        absl::StrCat("cannot create trace '", path, "': ", std::strerror(err)));
  }
  size_t written = std::fwrite(data.data(), 1, data.size(), f);
  int err = errno;
  bool close_failed = std::fclose(f) != 0;
  if (written != data.size() || close_failed) {
    if (close_failed && written == data.size()) err = errno;
    return absl::DataLossError(absl::StrCat("cannot write trace '", path, "' (", written,
                                            " of ", data.size(),
                                            " bytes written): ", std::strerror(err)));
  }
  return absl::OkStatus();
}

TraceSummary SummarizeTrace(const std::vector<TraceEvent> &events) {
  TraceSummary s;
  absl::flat_hash_map<uint64_t, uint64_t> live;
  absl::flat_hash_set<uint64_t> streams;
  absl::flat_hash_set<int> steps;
  uint64_t live_bytes = 0;
  for (const TraceEvent &e : events) {
    streams.insert(e.stream);
    steps.insert(e.step);
    switch (e.action) {
      case TraceAction::kAlloc: {
        ++s.num_allocs;
        s.total_allocated_bytes += e.size;
        auto [it, inserted] = live.try_emplace(e.address, e.size);
        if (!inserted) {
          live_bytes -= it->second;
          it->second = e.size;
        }
        live_bytes += e.size;
        s.peak_live_bytes = std::max(s.peak_live_bytes, live_bytes);
        break;
      }
      case TraceAction::kFreeRequested:
        ++s.num_free_requested;
        break;
      case TraceAction::kFreeCompleted: {
        ++s.num_frees;
        auto it = live.find(e.address);
        if (it != live.end()) {
          live_bytes -= it->second;
          live.erase(it);
        }
        break;
      }
    }
  }
  s.num_streams = static_cast<int64_t>(streams.size());
  s.num_steps = std::max<int>(1, static_cast<int>(steps.size()));
  s.live_blocks_at_end = static_cast<int64_t>(live.size());
  s.live_bytes_at_end = live_bytes;
  return s;
}

}  // namespace genesis::replay
