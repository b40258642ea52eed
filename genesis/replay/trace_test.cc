#include "genesis/replay/trace.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "genesis/replay/synthetic_trace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace genesis::replay {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

MATCHER_P5(Event, action, address, size, stream, line, "") {
  return arg.action == action && arg.address == address && arg.size == size &&
         arg.stream == stream && arg.line == line;
}

// Same actions, addresses, sizes and streams (line numbers may differ).
void ExpectSameEvents(const std::vector<TraceEvent> &a,
                      const std::vector<TraceEvent> &b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].action, b[i].action) << i;
    EXPECT_EQ(a[i].address, b[i].address) << i;
    EXPECT_EQ(a[i].size, b[i].size) << i;
    EXPECT_EQ(a[i].stream, b[i].stream) << i;
  }
}

class TempDir {
 public:
  TempDir() {
    std::string base = ::testing::TempDir();
    if (base.empty() || base.back() != '/') base += '/';
    std::string pattern = base + "trace_test_XXXXXX";
    char *made = mkdtemp(pattern.data());
    EXPECT_NE(made, nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::string cmd = "rm -rf '" + path_ + "'";
    (void)std::system(cmd.c_str());
  }
  std::string File(const std::string &name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::string ReadBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void WriteBytes(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

TEST(ParseTraceTest, ParsesCommentsHexDecimalAndBlankLines) {
  const std::string text =
      "# recorded on an H200\n"
      "\n"
      "alloc 0x7f0000000000 1024 0\n"
      "   \t\n"
      "alloc\t4096  2048\t0x10   # trailing comment\n"
      "free_requested 0x7F0000000000 1024 0\r\n"
      "free_completed 0x7f0000000000 0 0\n"
      "  # indented comment\n"
      "free_completed 4096 2048 16";  // no final newline, no free_requested
  auto events = ParseTrace(text, "t.trace");
  ASSERT_TRUE(events.ok()) << events.status();
  EXPECT_THAT(
      *events,
      ElementsAre(Event(TraceAction::kAlloc, 0x7f0000000000u, 1024u, 0u, 3),
                  Event(TraceAction::kAlloc, 4096u, 2048u, 16u, 5),
                  Event(TraceAction::kFreeRequested, 0x7f0000000000u, 1024u, 0u, 6),
                  Event(TraceAction::kFreeCompleted, 0x7f0000000000u, 0u, 0u, 7),
                  Event(TraceAction::kFreeCompleted, 4096u, 2048u, 16u, 9)));
}

TEST(ParseTraceTest, EmptyAndCommentOnlyTextsHaveNoEvents) {
  EXPECT_TRUE(ParseTrace("", "t")->empty());
  EXPECT_TRUE(ParseTrace("# nothing\n\n   \n", "t")->empty());
}

TEST(ParseTraceTest, AcceptsZeroSizeAndReusedAddresses) {
  auto events =
      ParseTrace("alloc 0x200 0 1\nfree_completed 0x200 0 1\nalloc 0x200 512 1\n", "t");
  ASSERT_TRUE(events.ok()) << events.status();
  EXPECT_EQ(events->size(), 3u);
  EXPECT_EQ((*events)[0].size, 0u);
}

TEST(ParseTraceTest, AcceptsTheLargestSaneSize) {
  auto events = ParseTrace("alloc 0x0 1125899906842624 0\n", "t");  // 2^50
  ASSERT_TRUE(events.ok()) << events.status();
}

struct BadCase {
  const char *text;
  int line;
  const char *message;
};

TEST(ParseTraceTest, ReportsEveryMalformedLineWithItsNumber) {
  const BadCase cases[] = {
      {"# c\nmalloc 0x0 1 0\n", 2, "unknown action 'malloc'"},
      {"alloc 0x0 1\n", 1, "expected 4 fields"},
      {"alloc 0x0 1 0 extra\n", 1, "got 5"},
      {"alloc 0x0 1 0\nfree_completed\n", 2, "got 1"},
      {"alloc 0xZZ 1 0\n", 1, "bad address '0xZZ'"},
      {"alloc 0x 1 0\n", 1, "bad address '0x'"},
      {"alloc 12abc 1 0\n", 1, "bad address '12abc'"},
      {"alloc 0x10000000000000000 1 0\n", 1, "bad address"},
      {"\n\nalloc 0x0 -4 0\n", 3, "negative size '-4'"},
      {"alloc 0x0 1.5 0\n", 1, "bad size '1.5'"},
      {"alloc 0x0 0x10 0\n", 1, "bad size '0x10'"},
      {"alloc 0x0 99999999999999999999 0\n", 1, "bad size"},
      {"alloc 0x0 1125899906842625 0\n", 1, "absurd size 1125899906842625"},
      {"alloc 0x0 1 -1\n", 1, "bad stream '-1'"},
      {"alloc 0x0 1 s0\n", 1, "bad stream 's0'"},
      {"alloc 0x100 1 0\nalloc 0x100 2 0\n", 2,
       "alloc of 0x100, which is still live (allocated at line 1"},
      {"alloc 0x100 1 0\nfree_requested 0x200 1 0\n", 2,
       "free_requested of 0x200, which is not live"},
      {"alloc 0x100 1 0\n# c\nfree_completed 0x200 1 0\n", 3,
       "free_completed of 0x200, which is not live"},
      {"alloc 0x100 1 0\nfree_completed 0x100 1 0\nfree_completed 0x100 1 0\n", 3,
       "free_completed of 0x100, which is not live"},
      {"alloc 0x100 1 0\nfree_requested 0x100 2 0\n", 2,
       "free_requested of 0x100 with size 2, but it was allocated with size 1 "
       "at line 1"},
      {"alloc 0x100 1 0\nfree_completed 0x100 7 0\n", 2, "with size 7"},
  };
  for (const BadCase &c : cases) {
    SCOPED_TRACE(c.text);
    auto events = ParseTrace(c.text, "bad.trace");
    ASSERT_FALSE(events.ok());
    EXPECT_EQ(events.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(events.status().message()),
                HasSubstr("bad.trace:" + std::to_string(c.line) + ": "));
    EXPECT_THAT(std::string(events.status().message()), HasSubstr(c.message));
  }
}

TEST(FormatTraceTest, RoundTripsThroughParseTrace) {
  std::vector<TraceEvent> events = {
      {TraceAction::kAlloc, 0x7f19bc000000, 154389504, 0, 0},
      {TraceAction::kAlloc, 0, 0, 0xffffffffffffffff, 0},
      {TraceAction::kFreeRequested, 0x7f19bc000000, 154389504, 0, 0},
      {TraceAction::kFreeCompleted, 0x7f19bc000000, 0, 0, 0},
      {TraceAction::kFreeCompleted, 0, 0, 0xffffffffffffffff, 0},
  };
  auto parsed = ParseTrace(FormatTrace(events), "formatted");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ExpectSameEvents(*parsed, events);
  EXPECT_EQ((*parsed)[4].line, 5);
}

TEST(ParseTraceTest, StepMarkersNumberTheEventsAfterThem) {
  const std::string text =
      "# setup, no marker yet\n"
      "alloc 0x1000 512 0\n"
      "# step 1\n"
      "alloc 0x2000 512 0\n"
      "  #   step   2  \n"
      "free_completed 0x2000 512 0\n"
      "# step two (not a marker)\n"
      "# step 3 extra (not a marker)\n"
      "# step -4 (not a marker)\n"
      "alloc 0x3000 512 0 # step 9: a trailing comment is not a marker\n"
      "# step 7\n"
      "free_completed 0x1000 512 0\n";
  auto parsed = ParseTrace(text, "steps");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->size(), 5u);
  const int steps[] = {0, 1, 2, 2, 7};
  for (size_t i = 0; i < parsed->size(); ++i) EXPECT_EQ((*parsed)[i].step, steps[i]) << i;
  EXPECT_EQ(SummarizeTrace(*parsed).num_steps, 4);
  // FormatTrace writes the markers back, and only where the step changes.
  auto again = ParseTrace(FormatTrace(*parsed), "formatted");
  ASSERT_TRUE(again.ok()) << again.status();
  for (size_t i = 0; i < again->size(); ++i) EXPECT_EQ((*again)[i].step, steps[i]) << i;
  EXPECT_EQ(FormatTrace(*parsed).find("# step 0"), std::string::npos);
  EXPECT_NE(FormatTrace(*parsed).find("# step 7\nfree_completed 0x1000"), std::string::npos);
}

TEST(FormatTraceTest, SyntheticTracesRoundTrip) {
  for (const auto &events : {TransformerTrainingTrace(7, 2), CnnTrainingTrace(7, 2)}) {
    auto parsed = ParseTrace(FormatTrace(events), "synthetic");
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    ExpectSameEvents(*parsed, events);
    for (size_t i = 0; i < parsed->size(); ++i) {
      ASSERT_EQ((*parsed)[i].line, events[i].line);
      ASSERT_EQ((*parsed)[i].step, events[i].step);
    }
    EXPECT_EQ(SummarizeTrace(events).num_steps, 3);  // Setup and two steps.
  }
}

TEST(SummarizeTraceTest, CountsAndPeaks) {
  auto events = ParseTrace(
      "alloc 0x100 100 0\n"
      "alloc 0x200 50 3\n"
      "free_requested 0x100 100 0\n"
      "free_completed 0x100 100 0\n"
      "alloc 0x300 20 0x10\n"
      "alloc 0x100 10 0\n",
      "t");
  ASSERT_TRUE(events.ok()) << events.status();
  TraceSummary s = SummarizeTrace(*events);
  EXPECT_EQ(s.num_allocs, 4);
  EXPECT_EQ(s.num_free_requested, 1);
  EXPECT_EQ(s.num_frees, 1);
  EXPECT_EQ(s.num_streams, 3);
  EXPECT_EQ(s.peak_live_bytes, 150u);
  EXPECT_EQ(s.total_allocated_bytes, 180u);
  EXPECT_EQ(s.live_blocks_at_end, 3);
  EXPECT_EQ(s.live_bytes_at_end, 80u);
}

TEST(ReadTraceTest, PlainAndGzipRoundTrip) {
  TempDir dir;
  const std::vector<TraceEvent> events = TransformerTrainingTrace(3, 2);
  for (bool gzip : {false, true}) {
    SCOPED_TRACE(gzip);
    // The name says nothing: gzip is recognised by its magic bytes.
    const std::string path = dir.File(gzip ? "compressed.txt" : "plain.gz");
    ASSERT_TRUE(WriteTrace(path, events, gzip).ok());
    const std::string bytes = ReadBytes(path);
    ASSERT_GE(bytes.size(), 2u);
    EXPECT_EQ(static_cast<unsigned char>(bytes[0]) == 0x1f, gzip);
    if (gzip) {
      EXPECT_LT(bytes.size(), FormatTrace(events).size() / 3);
    }
    auto read = ReadTrace(path);
    ASSERT_TRUE(read.ok()) << read.status();
    ExpectSameEvents(*read, events);
  }
}

TEST(ReadTraceTest, ReadsConcatenatedGzipMembers) {
  TempDir dir;
  auto first = ParseTrace("alloc 0x100 1 0\n", "t");
  auto second = ParseTrace("alloc 0x200 2 0\n", "t");
  ASSERT_TRUE(WriteTrace(dir.File("a.gz"), *first, true).ok());
  ASSERT_TRUE(WriteTrace(dir.File("b.gz"), *second, true).ok());
  WriteBytes(dir.File("ab.gz"),
             ReadBytes(dir.File("a.gz")) + ReadBytes(dir.File("b.gz")));
  auto read = ReadTrace(dir.File("ab.gz"));
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), 2u);
  EXPECT_EQ((*read)[1].address, 0x200u);
  EXPECT_EQ((*read)[1].line, 2);
}

TEST(ReadTraceTest, TruncatedGzipIsAnErrorNamingThePath) {
  TempDir dir;
  const std::string path = dir.File("t.trace.gz");
  ASSERT_TRUE(WriteTrace(path, CnnTrainingTrace(1, 2), true).ok());
  const std::string whole = ReadBytes(path);
  for (size_t keep : {whole.size() - 1, whole.size() - 8, whole.size() / 2, size_t{20},
                      size_t{5}, size_t{2}}) {
    SCOPED_TRACE(keep);
    WriteBytes(path, whole.substr(0, keep));
    auto read = ReadTrace(path);
    ASSERT_FALSE(read.ok());
    EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(std::string(read.status().message()), HasSubstr(path));
    EXPECT_THAT(std::string(read.status().message()), HasSubstr("gzip"));
  }
}

TEST(ReadTraceTest, CorruptGzipIsAnErrorNamingThePath) {
  TempDir dir;
  const std::string path = dir.File("t.trace.gz");
  ASSERT_TRUE(WriteTrace(path, TransformerTrainingTrace(1, 1), true).ok());
  const std::string whole = ReadBytes(path);
  // A flipped byte in the data, one in the CRC, and garbage after the stream.
  std::string data_flip = whole, crc_flip = whole;
  data_flip[whole.size() / 2] ^= 0x55;
  crc_flip[whole.size() - 6] ^= 0x01;
  for (const std::string &bad : {data_flip, crc_flip, whole + "garbage"}) {
    WriteBytes(path, bad);
    auto read = ReadTrace(path);
    ASSERT_FALSE(read.ok());
    EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(std::string(read.status().message()), HasSubstr(path));
  }
}

TEST(ReadTraceTest, ParseErrorsNameTheFileAndLine) {
  TempDir dir;
  const std::string path = dir.File("bad.trace");
  WriteBytes(path, "alloc 0x100 1 0\n\nfree 0x100 1 0\n");
  auto read = ReadTrace(path);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(read.status().message()),
              HasSubstr(path + ":3: unknown action 'free'"));
}

TEST(ReadTraceTest, MissingFileIsNotFound) {
  TempDir dir;
  const std::string path = dir.File("missing.trace.gz");
  auto read = ReadTrace(path);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(read.status().message()), HasSubstr(path));
}

TEST(WriteTraceTest, UnwritablePathIsAnError) {
  TempDir dir;
  const std::string path = dir.File("no/such/dir/t.trace");
  absl::Status s = WriteTrace(path, {}, false);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr(path));
}

}  // namespace
}  // namespace genesis::replay
