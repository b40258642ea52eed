#include "genesis/storage/shared_memory.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "genesis/core/status.h"
#include "gtest/gtest.h"

namespace genesis::storage {
namespace {

using ::testing::HasSubstr;

// As a std::string, which gmock prints readably (absl's own string_view it prints per char).
std::string MessageOf(const absl::Status& status) { return std::string(status.message()); }

// A recognisable byte for offset `i`.
std::byte Pattern(size_t i) { return static_cast<std::byte>((i * 7 + 3) & 0xff); }

// Tests unwrap results they need with ValueOrThrow: a failure throws, which gtest reports
// with the status, and the fixture still cleans up.
//
// Hands out names no other test or concurrently running test binary uses (pid + counter)
// and unlinks them all when the test ends, passed or failed; most are already gone by
// then, which is fine.
class SharedMemoryTest : public ::testing::Test {
 protected:
  ~SharedMemoryTest() override {
    for (const std::string& name : names_) shm_unlink(name.c_str());
  }

  std::string NewName() {
    static int counter = 0;
    names_.push_back(absl::StrCat("/genesis_shm_test_", getpid(), "_", counter++));
    return names_.back();
  }

  // Whether a region called `name` exists, asked of the system rather than of the code
  // under test.
  static bool Exists(const std::string& name) {
    const int fd = shm_open(name.c_str(), O_RDONLY, 0);
    if (fd >= 0) close(fd);
    return fd >= 0;
  }

 private:
  std::vector<std::string> names_;
};

TEST_F(SharedMemoryTest, CreateIsZeroFilledAndAttachSharesTheBytes) {
  const std::string name = NewName();
  constexpr size_t kBytes = 10000;  // Not a whole number of pages.
  absl::StatusOr<SharedMemory> owner = SharedMemory::Create(name, kBytes);
  ASSERT_TRUE(owner.ok()) << owner.status();
  EXPECT_TRUE(owner->is_owner());
  EXPECT_TRUE(owner->writable());
  EXPECT_EQ(owner->name(), name);
  ASSERT_EQ(owner->size(), kBytes);
  ASSERT_NE(owner->data(), nullptr);
  for (size_t i = 0; i < kBytes; ++i) ASSERT_EQ(owner->data()[i], std::byte{0}) << i;

  absl::StatusOr<SharedMemory> attacher = SharedMemory::Attach(name);
  ASSERT_TRUE(attacher.ok()) << attacher.status();
  EXPECT_FALSE(attacher->is_owner());
  EXPECT_TRUE(attacher->writable());
  ASSERT_EQ(attacher->size(), kBytes);
  EXPECT_NE(attacher->data(), owner->data());  // Two mappings of the same memory.

  for (size_t i = 0; i < kBytes; ++i) owner->mutable_data()[i] = Pattern(i);
  for (size_t i = 0; i < kBytes; ++i) ASSERT_EQ(attacher->data()[i], Pattern(i)) << i;
  attacher->mutable_data()[kBytes - 1] = std::byte{0x5a};
  EXPECT_EQ(owner->data()[kBytes - 1], std::byte{0x5a});
}

TEST_F(SharedMemoryTest, LeadingSlashIsOptional) {
  const std::string name = NewName();
  SharedMemory owner = ValueOrThrow(SharedMemory::Create(name.substr(1), 64));
  EXPECT_EQ(owner.name(), name);
  absl::StatusOr<SharedMemory> with_slash = SharedMemory::Attach(name);
  absl::StatusOr<SharedMemory> without_slash = SharedMemory::Attach(name.substr(1));
  ASSERT_TRUE(with_slash.ok()) << with_slash.status();
  ASSERT_TRUE(without_slash.ok()) << without_slash.status();
  EXPECT_EQ(without_slash->name(), name);
}

TEST_F(SharedMemoryTest, LongestNameWorks) {
  const std::string name = NewName();
  const std::string longest = name + std::string(NAME_MAX - (name.size() - 1), 'x');
  ASSERT_EQ(longest.size(), size_t{NAME_MAX} + 1);
  absl::StatusOr<SharedMemory> shm = SharedMemory::Create(longest, 8);
  shm_unlink(longest.c_str());  // Not one of NewName()'s, so clean it here.
  EXPECT_TRUE(shm.ok()) << shm.status();
}

TEST_F(SharedMemoryTest, ReadOnlyAttachSeesWritesButCannotWrite) {
  const std::string name = NewName();
  SharedMemory owner = ValueOrThrow(SharedMemory::Create(name, 4096));
  absl::StatusOr<SharedMemory> reader =
      SharedMemory::Attach(name, SharedMemory::Access::kReadOnly);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_FALSE(reader->writable());
  EXPECT_EQ(reader->mutable_data(), nullptr);
  owner.mutable_data()[100] = std::byte{7};
  EXPECT_EQ(reader->data()[100], std::byte{7});
}

// The child attaches by name, checks what the parent wrote and leaves an answer in the last
// byte. Between fork and _exit it uses only Attach and plain loops, and reports through its
// exit status, never through gtest.
TEST_F(SharedMemoryTest, ForkedChildAttachesByName) {
  const std::string name = NewName();
  constexpr size_t kBytes = 3 * 4096 + 17;
  SharedMemory owner = ValueOrThrow(SharedMemory::Create(name, kBytes));
  ASSERT_EQ(owner.size(), kBytes);
  for (size_t i = 0; i + 1 < kBytes; ++i) owner.mutable_data()[i] = Pattern(i);

  const pid_t pid = fork();
  ASSERT_GE(pid, 0) << "fork: " << std::strerror(errno);
  if (pid == 0) {
    absl::StatusOr<SharedMemory> view = SharedMemory::Attach(name);
    if (!view.ok()) _exit(10);
    if (view->size() != kBytes) _exit(11);
    for (size_t i = 0; i + 1 < kBytes; ++i) {
      if (view->data()[i] != Pattern(i)) _exit(12);
    }
    view->mutable_data()[kBytes - 1] = std::byte{42};
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid) << std::strerror(errno);
  ASSERT_TRUE(WIFEXITED(status)) << "child did not exit normally: status " << status;
  ASSERT_EQ(WEXITSTATUS(status), 0)
      << "child failed (10: attach, 11: size, 12: pattern differs)";
  EXPECT_EQ(owner.data()[kBytes - 1], std::byte{42});
  EXPECT_TRUE(Exists(name));  // The child's _exit ran no destructor.
}

TEST_F(SharedMemoryTest, OwnerDestructorUnlinksAttacherDestructorDoesNot) {
  const std::string name = NewName();
  absl::StatusOr<SharedMemory> attacher;
  {
    SharedMemory owner = ValueOrThrow(SharedMemory::Create(name, 128));
    owner.mutable_data()[5] = std::byte{9};
    {
      absl::StatusOr<SharedMemory> other = SharedMemory::Attach(name);
      ASSERT_TRUE(other.ok()) << other.status();
    }
    EXPECT_TRUE(Exists(name));
    attacher = SharedMemory::Attach(name);
    ASSERT_TRUE(attacher.ok()) << attacher.status();
  }
  EXPECT_FALSE(Exists(name));
  // Unlinking removed the name, not the memory behind a live mapping.
  EXPECT_EQ(attacher->data()[5], std::byte{9});
  EXPECT_EQ(SharedMemory::Attach(name).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(SharedMemoryTest, KeepNameOutlivesTheOwner) {
  const std::string name = NewName();
  {
    SharedMemory owner = ValueOrThrow(SharedMemory::Create(name, 128));
    owner.mutable_data()[0] = std::byte{1};
    owner.KeepName();
  }
  ASSERT_TRUE(Exists(name));
  absl::StatusOr<SharedMemory> later = SharedMemory::Attach(name);
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_EQ(later->data()[0], std::byte{1});
}

TEST_F(SharedMemoryTest, OwnerUnlinksExplicitly) {
  const std::string name = NewName();
  SharedMemory owner = ValueOrThrow(SharedMemory::Create(name, 256));
  ASSERT_TRUE(owner.Unlink().ok());
  EXPECT_FALSE(Exists(name));
  EXPECT_TRUE(owner.Unlink().ok());  // Idempotent.
  owner.mutable_data()[3] = std::byte{3};  // The mapping outlives the name.
  EXPECT_EQ(owner.data()[3], std::byte{3});
  // The name is free again, and the first owner's destructor must leave the new one be.
  absl::StatusOr<SharedMemory> second = SharedMemory::Create(name, 16);
  ASSERT_TRUE(second.ok()) << second.status();
  { SharedMemory gone = std::move(owner); }
  EXPECT_TRUE(Exists(name));
}

TEST_F(SharedMemoryTest, MovesTransferOwnership) {
  const std::string first_name = NewName();
  const std::string second_name = NewName();
  SharedMemory first = ValueOrThrow(SharedMemory::Create(first_name, 64));
  const std::byte* data = first.data();

  SharedMemory moved(std::move(first));
  EXPECT_EQ(moved.data(), data);
  EXPECT_TRUE(moved.is_owner());
  EXPECT_EQ(first.data(), nullptr);  // NOLINT(bugprone-use-after-move): checking it.
  EXPECT_FALSE(first.is_owner());    // NOLINT(bugprone-use-after-move)
  { SharedMemory destroyed = std::move(first); }  // NOLINT(bugprone-use-after-move)
  EXPECT_TRUE(Exists(first_name));

  SharedMemory second = ValueOrThrow(SharedMemory::Create(second_name, 64));
  second = std::move(moved);  // Releases what `second` held: its name is unlinked.
  EXPECT_FALSE(Exists(second_name));
  EXPECT_TRUE(Exists(first_name));
  EXPECT_EQ(second.name(), first_name);
  EXPECT_EQ(second.data(), data);
}

TEST_F(SharedMemoryTest, CloseIsIdempotentAndClearsData) {
  const std::string name = NewName();
  SharedMemory owner = ValueOrThrow(SharedMemory::Create(name, 64));
  absl::StatusOr<SharedMemory> attacher = SharedMemory::Attach(name);
  ASSERT_TRUE(attacher.ok()) << attacher.status();

  EXPECT_TRUE(owner.Close().ok());
  EXPECT_EQ(owner.data(), nullptr);
  EXPECT_EQ(owner.mutable_data(), nullptr);
  EXPECT_EQ(owner.size(), 0u);
  EXPECT_FALSE(owner.writable());
  EXPECT_EQ(owner.name(), name);
  EXPECT_TRUE(owner.Close().ok());
  EXPECT_TRUE(Exists(name));  // Close unmaps; the name stays until unlinked.

  EXPECT_TRUE(attacher->Close().ok());
  EXPECT_EQ(attacher->data(), nullptr);
  EXPECT_TRUE(attacher->Close().ok());

  EXPECT_TRUE(owner.Unlink().ok());  // The owner may still unlink after closing.
  EXPECT_FALSE(Exists(name));
}

TEST_F(SharedMemoryTest, CreateOfExistingNameIsAlreadyExists) {
  const std::string name = NewName();
  SharedMemory owner = ValueOrThrow(SharedMemory::Create(name, 64));
  owner.mutable_data()[0] = std::byte{77};
  absl::StatusOr<SharedMemory> again = SharedMemory::Create(name, 64);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists) << again.status();
  EXPECT_THAT(MessageOf(again.status()), HasSubstr(name));
  // The failed Create neither unlinked nor touched the existing region.
  EXPECT_TRUE(Exists(name));
  EXPECT_EQ(owner.data()[0], std::byte{77});
}

TEST_F(SharedMemoryTest, AttachOfMissingNameIsNotFound) {
  const std::string name = NewName();
  absl::StatusOr<SharedMemory> shm = SharedMemory::Attach(name);
  ASSERT_FALSE(shm.ok());
  EXPECT_EQ(shm.status().code(), absl::StatusCode::kNotFound) << shm.status();
  EXPECT_THAT(MessageOf(shm.status()), HasSubstr(name));
}

TEST_F(SharedMemoryTest, AttachOfEmptyRegionFails) {
  const std::string name = NewName();
  // A region created but not sized yet, as a racing creator would leave it.
  const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  close(fd);
  absl::StatusOr<SharedMemory> shm = SharedMemory::Attach(name);
  ASSERT_FALSE(shm.ok());
  EXPECT_EQ(shm.status().code(), absl::StatusCode::kFailedPrecondition) << shm.status();
  EXPECT_THAT(MessageOf(shm.status()), HasSubstr(name));
}

TEST_F(SharedMemoryTest, BadNamesAreInvalidArgument) {
  const std::string too_long(NAME_MAX + 1, 'n');
  const std::string with_nul("ab\0xy", 5);
  for (const std::string& bad :
       {std::string(), std::string("/"), std::string("a/b"), std::string("/a/b"),
        std::string("//a"), std::string("a/"), std::string("."), std::string("/.."), too_long,
        with_nul}) {
    for (bool create : {true, false}) {
      absl::StatusOr<SharedMemory> shm =
          create ? SharedMemory::Create(bad, 64) : SharedMemory::Attach(bad);
      ASSERT_FALSE(shm.ok()) << "'" << bad << "'";
      EXPECT_EQ(shm.status().code(), absl::StatusCode::kInvalidArgument) << shm.status();
      EXPECT_THAT(MessageOf(shm.status()), HasSubstr("invalid shared memory name")) << bad;
    }
  }
  absl::StatusOr<SharedMemory> slash = SharedMemory::Create("a/b", 64);
  EXPECT_THAT(MessageOf(slash.status()), HasSubstr("'a/b'"));
  absl::StatusOr<SharedMemory> nul = SharedMemory::Create(with_nul, 64);
  EXPECT_THAT(MessageOf(nul.status()), HasSubstr("'ab\\x00xy'"));  // Escaped, not cut.
}

TEST_F(SharedMemoryTest, ZeroSizeIsInvalidArgument) {
  const std::string name = NewName();
  absl::StatusOr<SharedMemory> shm = SharedMemory::Create(name, 0);
  ASSERT_FALSE(shm.ok());
  EXPECT_EQ(shm.status().code(), absl::StatusCode::kInvalidArgument) << shm.status();
  EXPECT_THAT(MessageOf(shm.status()), HasSubstr(name));
  EXPECT_FALSE(Exists(name));
}

TEST_F(SharedMemoryTest, FailedSizingLeavesNothingBehind) {
  const std::string name = NewName();
  // More than /dev/shm can hold, yet a valid size: ftruncate or mmap refuses it.
  absl::StatusOr<SharedMemory> shm = SharedMemory::Create(name, size_t{1} << 62);
  if (shm.ok()) GTEST_SKIP() << "this system mapped 4 EiB of shared memory";
  EXPECT_THAT(MessageOf(shm.status()), HasSubstr(name));
  EXPECT_FALSE(Exists(name));
}

TEST_F(SharedMemoryTest, UnlinkByAttacherIsFailedPrecondition) {
  const std::string name = NewName();
  SharedMemory owner = ValueOrThrow(SharedMemory::Create(name, 64));
  absl::StatusOr<SharedMemory> attacher = SharedMemory::Attach(name);
  ASSERT_TRUE(attacher.ok()) << attacher.status();
  absl::Status unlink = attacher->Unlink();
  EXPECT_EQ(unlink.code(), absl::StatusCode::kFailedPrecondition) << unlink;
  EXPECT_THAT(MessageOf(unlink), HasSubstr(name));
  EXPECT_TRUE(Exists(name));
  attacher->KeepName();  // No effect for an attacher; the owner still unlinks.
}

TEST_F(SharedMemoryTest, UnlinkAfterSomeoneElseDidIsNotFound) {
  const std::string name = NewName();
  SharedMemory owner = ValueOrThrow(SharedMemory::Create(name, 64));
  ASSERT_EQ(shm_unlink(name.c_str()), 0);
  absl::Status unlink = owner.Unlink();
  EXPECT_EQ(unlink.code(), absl::StatusCode::kNotFound) << unlink;
  EXPECT_THAT(MessageOf(unlink), HasSubstr(name));
}

}  // namespace
}  // namespace genesis::storage
