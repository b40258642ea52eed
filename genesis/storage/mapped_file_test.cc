#include "genesis/storage/mapped_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "genesis/core/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace genesis::storage {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// As a std::string, which gmock prints readably (absl's own string_view it prints per char).
std::string MessageOf(const absl::Status& status) { return std::string(status.message()); }

// `n` recognisable bytes, different at every offset within a few pages.
std::string Pattern(size_t n) {
  std::string bytes(n, '\0');
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<char>((i * 7 + i / 251) & 0xff);
  return bytes;
}

// The mapped bytes as a string, for comparing with what the file holds.
std::string Bytes(const MappedFile& file) {
  return std::string(reinterpret_cast<const char*>(file.data()), file.size());
}

// Tests unwrap results they need with ValueOrThrow: a failure throws, which gtest reports
// with the status, and the fixture still removes its directory.
class MappedFileTest : public ::testing::Test {
 protected:
  MappedFileTest() {
    std::string pattern =
        (std::filesystem::path(::testing::TempDir()) / "mapped_file_test_XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      ADD_FAILURE() << "mkdtemp(" << pattern << "): " << std::strerror(errno);
    }
    dir_ = pattern;
  }
  ~MappedFileTest() override {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  std::string PathOf(const std::string& name) const { return dir_ + "/" + name; }

  // Writes `bytes` to the file `name` in the test directory and returns its path.
  std::string WriteFile(const std::string& name, const std::string& bytes) const {
    const std::string path = PathOf(name);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    EXPECT_TRUE(out.good()) << path;
    return path;
  }

  static std::string ReadFile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  std::string dir_;
};

TEST(MapModeTest, ParsesLettersAndNames) {
  const struct {
    std::string_view letters, name;
    MapMode mode;
  } kCases[] = {{"r", "read", MapMode::kRead},
                {"r+", "read_write", MapMode::kReadWrite},
                {"c", "copy_on_write", MapMode::kCopyOnWrite},
                {"w+", "create", MapMode::kCreate}};
  for (const auto& c : kCases) {
    EXPECT_EQ(ParseMapMode(c.letters).value(), c.mode) << c.letters;
    EXPECT_EQ(ParseMapMode(c.name).value(), c.mode) << c.name;
    EXPECT_EQ(MapModeName(c.mode), c.name);
    EXPECT_EQ(ParseMapMode(MapModeName(c.mode)).value(), c.mode);
  }
}

TEST(MapModeTest, UnknownModeIsInvalidArgumentQuotingIt) {
  for (std::string_view bad : {"", "w", "R", "rw", "read ", "readwrite", "r+\n"}) {
    absl::StatusOr<MapMode> mode = ParseMapMode(bad);
    ASSERT_FALSE(mode.ok()) << "'" << bad << "'";
    EXPECT_EQ(mode.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(MessageOf(mode.status()), HasSubstr("unknown map mode"));
  }
  EXPECT_THAT(MessageOf(ParseMapMode("rw").status()),
              AllOf(HasSubstr("'rw'"), HasSubstr("r+"), HasSubstr("copy_on_write")));
  EXPECT_THAT(MessageOf(ParseMapMode("r+\n").status()), HasSubstr("'r+\\n'"));
}

TEST(PageSizeTest, IsAPowerOfTwo) {
  const size_t page = PageSize();
  EXPECT_GE(page, 4096u);
  EXPECT_EQ(page & (page - 1), 0u);
}

TEST_F(MappedFileTest, ReadMapsTheWholeFile) {
  const std::string content = Pattern(3 * PageSize() + 123);
  const std::string path = WriteFile("read.bin", content);
  MappedFile file = ValueOrThrow(MappedFile::Open(path, MapMode::kRead));
  EXPECT_EQ(file.mode(), MapMode::kRead);
  EXPECT_EQ(file.path(), path);
  EXPECT_FALSE(file.writable());
  EXPECT_EQ(file.mutable_data(), nullptr);
  ASSERT_EQ(file.size(), content.size());
  EXPECT_EQ(Bytes(file), content);
  EXPECT_TRUE(file.Flush().ok());  // Nothing to write.
  EXPECT_TRUE(file.Close().ok());
}

TEST_F(MappedFileTest, ReadWriteChangesReachTheFile) {
  const std::string content = Pattern(10000);
  const std::string path = WriteFile("rw.bin", content);
  MappedFile file = ValueOrThrow(MappedFile::Open(path, MapMode::kReadWrite));
  ASSERT_TRUE(file.writable());
  ASSERT_EQ(file.size(), content.size());
  std::memcpy(file.mutable_data() + 100, "hello", 5);
  ASSERT_TRUE(file.Flush().ok());
  std::string expected = content;
  expected.replace(100, 5, "hello");
  EXPECT_EQ(ReadFile(path), expected);

  file.mutable_data()[9999] = std::byte{'!'};
  ASSERT_TRUE(file.Close().ok());
  expected[9999] = '!';
  EXPECT_EQ(ReadFile(path), expected);
  MappedFile reopened = ValueOrThrow(MappedFile::Open(path, MapMode::kRead));
  EXPECT_EQ(Bytes(reopened), expected);
}

TEST_F(MappedFileTest, DestructorAloneStillWritesThrough) {
  const std::string path = WriteFile("dtor.bin", Pattern(64));
  {
    MappedFile file = ValueOrThrow(MappedFile::Open(path, MapMode::kReadWrite));
    file.mutable_data()[0] = std::byte{'X'};
  }
  EXPECT_EQ(ReadFile(path)[0], 'X');
}

TEST_F(MappedFileTest, CopyOnWriteChangesNeverReachTheFile) {
  const std::string content = Pattern(2 * PageSize());
  const std::string path = WriteFile("cow.bin", content);
  MappedFile file = ValueOrThrow(MappedFile::Open(path, MapMode::kCopyOnWrite));
  EXPECT_EQ(file.mode(), MapMode::kCopyOnWrite);
  ASSERT_TRUE(file.writable());
  std::memset(file.mutable_data(), 'z', file.size());
  EXPECT_EQ(Bytes(file), std::string(content.size(), 'z'));
  EXPECT_TRUE(file.Flush().ok());  // A no-op: nothing may reach the file.
  EXPECT_EQ(ReadFile(path), content);
  MappedFile other = ValueOrThrow(MappedFile::Open(path, MapMode::kRead));
  EXPECT_EQ(Bytes(other), content);
  EXPECT_TRUE(file.Close().ok());
  EXPECT_EQ(ReadFile(path), content);
}

TEST_F(MappedFileTest, CreateMakesAZeroFilledFileOfTheSize) {
  const std::string path = PathOf("new.bin");
  MappedFile file = ValueOrThrow(MappedFile::Open(path, MapMode::kCreate, 5000));
  EXPECT_EQ(file.mode(), MapMode::kCreate);
  ASSERT_TRUE(file.writable());
  ASSERT_EQ(file.size(), 5000u);
  EXPECT_EQ(Bytes(file), std::string(5000, '\0'));
  EXPECT_EQ(std::filesystem::file_size(path), 5000u);
  file.mutable_data()[4999] = std::byte{'e'};
  ASSERT_TRUE(file.Close().ok());
  std::string expected(5000, '\0');
  expected[4999] = 'e';
  EXPECT_EQ(ReadFile(path), expected);
}

TEST_F(MappedFileTest, CreateTruncatesAnExistingFile) {
  const std::string path = WriteFile("old.bin", Pattern(20000));
  MappedFile file = ValueOrThrow(MappedFile::Open(path, MapMode::kCreate, 100));
  EXPECT_EQ(Bytes(file), std::string(100, '\0'));
  EXPECT_EQ(std::filesystem::file_size(path), 100u);
}

TEST_F(MappedFileTest, CreateWithOffsetMakesTheFileOffsetPlusBytes) {
  const std::string path = PathOf("header_and_body.bin");
  const size_t offset = PageSize() + 16;
  MappedFile file = ValueOrThrow(MappedFile::Open(path, MapMode::kCreate, 64, offset));
  ASSERT_EQ(file.size(), 64u);
  std::memset(file.mutable_data(), 'b', 64);
  ASSERT_TRUE(file.Close().ok());
  EXPECT_EQ(ReadFile(path), std::string(offset, '\0') + std::string(64, 'b'));
}

TEST_F(MappedFileTest, AnyOffsetMapsTheRightBytes) {
  const size_t page = PageSize();
  const std::string content = Pattern(4 * page);
  const std::string path = WriteFile("offsets.bin", content);
  for (size_t offset : {size_t{0}, size_t{1}, size_t{3}, page - 1, page, page + 5, 2 * page,
                        4 * page - 1}) {
    for (size_t bytes : {size_t{0}, size_t{1}}) {  // 0: to the end.
      MappedFile file = ValueOrThrow(MappedFile::Open(path, MapMode::kRead, bytes, offset));
      const std::string expected = content.substr(offset, bytes == 0 ? std::string::npos : 1);
      ASSERT_EQ(Bytes(file), expected) << "offset " << offset << " bytes " << bytes;
    }
  }
  // A window spanning a page boundary from an unaligned offset.
  MappedFile window = ValueOrThrow(MappedFile::Open(path, MapMode::kRead, 100, page - 50));
  EXPECT_EQ(Bytes(window), content.substr(page - 50, 100));
}

TEST_F(MappedFileTest, ReadWriteAtAnUnalignedOffsetWritesTheRightBytes) {
  const size_t page = PageSize();
  const std::string content = Pattern(3 * page);
  const std::string path = WriteFile("rw_offset.bin", content);
  const size_t offset = page + 7;
  MappedFile file = ValueOrThrow(MappedFile::Open(path, MapMode::kReadWrite, 10, offset));
  std::memcpy(file.mutable_data(), "0123456789", 10);
  ASSERT_TRUE(file.Close().ok());
  std::string expected = content;
  expected.replace(offset, 10, "0123456789");
  EXPECT_EQ(ReadFile(path), expected);
}

TEST_F(MappedFileTest, AdviseAcceptsEveryHint) {
  const std::string path = WriteFile("advise.bin", Pattern(3 * PageSize() + 1));
  MappedFile file = ValueOrThrow(MappedFile::Open(path, MapMode::kRead, 0, 10));
  for (MapAdvice advice : {MapAdvice::kSequential, MapAdvice::kWillNeed, MapAdvice::kRandom,
                           MapAdvice::kNormal}) {
    absl::Status advised = file.Advise(advice);
    EXPECT_TRUE(advised.ok()) << advised;
  }
}

TEST_F(MappedFileTest, CloseIsIdempotentAndEndsUse) {
  const std::string path = WriteFile("close.bin", Pattern(100));
  for (MapMode mode : {MapMode::kRead, MapMode::kReadWrite, MapMode::kCopyOnWrite}) {
    MappedFile file = ValueOrThrow(MappedFile::Open(path, mode));
    ASSERT_TRUE(file.Close().ok());
    EXPECT_EQ(file.data(), nullptr);
    EXPECT_EQ(file.mutable_data(), nullptr);
    EXPECT_EQ(file.size(), 0u);
    EXPECT_FALSE(file.writable());
    EXPECT_EQ(file.path(), path);
    EXPECT_TRUE(file.Close().ok());
    EXPECT_EQ(file.Flush().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(MessageOf(file.Flush()), HasSubstr(path));
    EXPECT_EQ(file.Advise(MapAdvice::kWillNeed).code(), absl::StatusCode::kFailedPrecondition);
  }
}

TEST_F(MappedFileTest, MovesTransferTheMapping) {
  const std::string content = Pattern(300);
  const std::string path = WriteFile("move.bin", content);
  MappedFile first = ValueOrThrow(MappedFile::Open(path, MapMode::kReadWrite));
  const std::byte* data = first.data();
  MappedFile moved(std::move(first));
  EXPECT_EQ(moved.data(), data);
  EXPECT_EQ(first.data(), nullptr);  // NOLINT(bugprone-use-after-move): checking it.
  EXPECT_TRUE(first.Close().ok());   // NOLINT(bugprone-use-after-move)

  MappedFile other = ValueOrThrow(MappedFile::Open(path, MapMode::kRead));
  other = std::move(moved);  // Unmaps what `other` held.
  EXPECT_EQ(other.data(), data);
  EXPECT_EQ(other.mode(), MapMode::kReadWrite);
  other.mutable_data()[0] = std::byte{'M'};
  ASSERT_TRUE(other.Close().ok());
  EXPECT_EQ(ReadFile(path)[0], 'M');
}

// --- Errors.

TEST_F(MappedFileTest, MissingFileIsNotFound) {
  const std::string path = PathOf("missing.bin");
  for (MapMode mode : {MapMode::kRead, MapMode::kReadWrite, MapMode::kCopyOnWrite}) {
    absl::StatusOr<MappedFile> file = MappedFile::Open(path, mode);
    ASSERT_FALSE(file.ok()) << MapModeName(mode);
    EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound) << file.status();
    EXPECT_THAT(MessageOf(file.status()), HasSubstr(path));
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  const std::string in_missing_dir = PathOf("no_such_dir/new.bin");
  absl::StatusOr<MappedFile> created = MappedFile::Open(in_missing_dir, MapMode::kCreate, 8);
  EXPECT_EQ(created.status().code(), absl::StatusCode::kNotFound) << created.status();
  EXPECT_THAT(MessageOf(created.status()), HasSubstr(in_missing_dir));
}

TEST_F(MappedFileTest, ShortFileIsOutOfRangeNamingBothSizes) {
  const std::string path = WriteFile("short.bin", Pattern(1000));
  for (MapMode mode : {MapMode::kRead, MapMode::kReadWrite, MapMode::kCopyOnWrite}) {
    absl::StatusOr<MappedFile> file = MappedFile::Open(path, mode, 600, 500);
    ASSERT_FALSE(file.ok()) << MapModeName(mode);
    EXPECT_EQ(file.status().code(), absl::StatusCode::kOutOfRange) << file.status();
    EXPECT_THAT(MessageOf(file.status()),
                AllOf(HasSubstr(path), HasSubstr("1000 bytes"), HasSubstr("needs 1100")));
  }
  // To the end from at or past the end.
  for (size_t offset : {1000, 5000}) {
    absl::StatusOr<MappedFile> file = MappedFile::Open(path, MapMode::kRead, 0, offset);
    EXPECT_EQ(file.status().code(), absl::StatusCode::kOutOfRange) << file.status();
    EXPECT_THAT(MessageOf(file.status()), HasSubstr("only 1000 bytes"));
  }
  EXPECT_TRUE(MappedFile::Open(path, MapMode::kRead, 500, 500).ok());  // Exactly fits.
  EXPECT_EQ(ReadFile(path).size(), 1000u);  // Never grown.
}

TEST_F(MappedFileTest, EmptyFileIsInvalidArgument) {
  const std::string path = WriteFile("empty.bin", "");
  for (MapMode mode : {MapMode::kRead, MapMode::kReadWrite, MapMode::kCopyOnWrite}) {
    absl::StatusOr<MappedFile> file = MappedFile::Open(path, mode);
    ASSERT_FALSE(file.ok()) << MapModeName(mode);
    EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument) << file.status();
    EXPECT_THAT(MessageOf(file.status()), AllOf(HasSubstr(path), HasSubstr("empty")));
  }
  // Asking for bytes of it is a short file instead.
  EXPECT_EQ(MappedFile::Open(path, MapMode::kRead, 1).status().code(),
            absl::StatusCode::kOutOfRange);
}

TEST_F(MappedFileTest, ReadOnlyFileOpenedForWritingIsPermissionDenied) {
  const std::string content = Pattern(100);
  const std::string path = WriteFile("readonly.bin", content);
  ASSERT_EQ(chmod(path.c_str(), 0400), 0) << std::strerror(errno);
  // Reading, and copy-on-write, need only read access.
  EXPECT_TRUE(MappedFile::Open(path, MapMode::kRead).ok());
  MappedFile cow = ValueOrThrow(MappedFile::Open(path, MapMode::kCopyOnWrite));
  cow.mutable_data()[0] = std::byte{0};
  if (geteuid() == 0) GTEST_SKIP() << "root ignores file permissions";
  for (MapMode mode : {MapMode::kReadWrite, MapMode::kCreate}) {
    const size_t bytes = mode == MapMode::kCreate ? 8 : 0;
    absl::StatusOr<MappedFile> file = MappedFile::Open(path, mode, bytes);
    ASSERT_FALSE(file.ok()) << MapModeName(mode);
    EXPECT_EQ(file.status().code(), absl::StatusCode::kPermissionDenied) << file.status();
    EXPECT_THAT(MessageOf(file.status()), HasSubstr(path));
  }
  EXPECT_EQ(ReadFile(path), content);  // kCreate did not truncate it.
}

TEST_F(MappedFileTest, CreateWithZeroBytesIsInvalidArgument) {
  const std::string path = PathOf("zero.bin");
  absl::StatusOr<MappedFile> file = MappedFile::Open(path, MapMode::kCreate, 0);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument) << file.status();
  EXPECT_THAT(MessageOf(file.status()), HasSubstr(path));
  EXPECT_FALSE(std::filesystem::exists(path));  // Checked before creating anything.
}

TEST_F(MappedFileTest, DirectoryIsFailedPrecondition) {
  for (MapMode mode :
       {MapMode::kRead, MapMode::kReadWrite, MapMode::kCopyOnWrite, MapMode::kCreate}) {
    absl::StatusOr<MappedFile> file = MappedFile::Open(dir_, mode, 8);
    ASSERT_FALSE(file.ok()) << MapModeName(mode);
    EXPECT_EQ(file.status().code(), absl::StatusCode::kFailedPrecondition) << file.status();
    EXPECT_THAT(MessageOf(file.status()), HasSubstr(dir_));
  }
}

TEST_F(MappedFileTest, PathWithNulIsInvalidArgument) {
  const std::string path = WriteFile("nul.bin", Pattern(10));
  const std::string with_nul = path + std::string("\0x", 2);
  absl::StatusOr<MappedFile> file = MappedFile::Open(with_nul, MapMode::kRead);
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument) << file.status();
  EXPECT_THAT(MessageOf(file.status()), HasSubstr("\\x00x"));
}

TEST_F(MappedFileTest, OverflowingRangeIsInvalidArgument) {
  const std::string path = WriteFile("overflow.bin", Pattern(10));
  for (size_t offset : {~size_t{0}, size_t{1} << 63}) {
    absl::StatusOr<MappedFile> file = MappedFile::Open(path, MapMode::kRead, 2, offset);
    EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument) << file.status();
  }
}

}  // namespace
}  // namespace genesis::storage
