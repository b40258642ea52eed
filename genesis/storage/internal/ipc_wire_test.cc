#include "genesis/storage/internal/ipc_wire.h"

#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace genesis::storage::ipc_internal {
namespace {

using ::testing::HasSubstr;

class IpcWireTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds_), 0); }
  void TearDown() override {
    for (int fd : fds_) {
      if (fd >= 0) close(fd);
    }
  }
  void CloseSender() {
    close(fds_[0]);
    fds_[0] = -1;
  }
  int sender() const { return fds_[0]; }
  int receiver() const { return fds_[1]; }

 private:
  int fds_[2] = {-1, -1};
};

Header ChunkHeader(uint32_t chunks, uint64_t chunk_bytes) {
  Header h;
  h.kind = Kind::kChunks;
  h.device = 1;
  std::strcpy(h.uuid, "GPU-12345678-abcd-abcd-abcd-123456789abc");
  h.dtype = 8;  // float32
  h.rank = 2;
  h.shape[0] = 3;
  h.shape[1] = 4;
  h.strides[0] = 4;
  h.strides[1] = 1;
  h.num_chunks = chunks;
  h.range_bytes = chunks * chunk_bytes;
  h.range_offset = 512;
  h.memory_bytes = 48;
  return h;
}

// Descriptors whose identity can be checked: memfds holding their index.
std::vector<int> MakeFds(int n) {
  std::vector<int> fds;
  for (int i = 0; i < n; ++i) {
    const int fd = memfd_create("ipc_wire_test", MFD_CLOEXEC);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(write(fd, &i, sizeof(i)), static_cast<ssize_t>(sizeof(i)));
    fds.push_back(fd);
  }
  return fds;
}

TEST_F(IpcWireTest, ChunksAndDescriptorsArriveInOrder) {
  constexpr int kChunks = kFdsPerBatch + 5;  // Two batches.
  const Header sent = ChunkHeader(kChunks, 2 << 20);
  std::vector<uint64_t> sizes(kChunks, 2 << 20);
  std::vector<int> fds = MakeFds(kChunks);
  // The socket buffer holds the whole message, so one thread can send and receive.
  ASSERT_TRUE(SendMessage(sender(), sent, sizes, fds).ok());
  for (int fd : fds) close(fd);
  absl::StatusOr<Message> got = ReceiveMessage(receiver());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(std::memcmp(&got->header, &sent, sizeof(Header)), 0);
  EXPECT_EQ(got->chunk_bytes, sizes);
  ASSERT_EQ(got->fds.size(), static_cast<size_t>(kChunks));
  for (int i = 0; i < kChunks; ++i) {
    int value = -1;
    ASSERT_EQ(pread(got->fds[i].get(), &value, sizeof(value), 0),
              static_cast<ssize_t>(sizeof(value)));
    EXPECT_EQ(value, i);
  }
}

TEST_F(IpcWireTest, LegacyMessageCarriesNoDescriptors) {
  Header sent;
  sent.kind = Kind::kLegacy;
  std::memset(sent.legacy_handle, 7, sizeof(sent.legacy_handle));
  sent.range_bytes = 1 << 20;
  sent.range_offset = 4096;
  sent.memory_bytes = 1024;
  ASSERT_TRUE(SendMessage(sender(), sent, {}, {}).ok());
  absl::StatusOr<Message> got = ReceiveMessage(receiver());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->header.legacy_handle[63], 7);
  EXPECT_TRUE(got->fds.empty());
}

TEST_F(IpcWireTest, MalformedMessagesAreRejected) {
  struct Case {
    std::string name;
    void (*corrupt)(Header&);
    std::string message;
  };
  const std::vector<Case> cases = {
      {"magic", [](Header& h) { h.magic = 1; }, "bad magic 1"},
      {"version", [](Header& h) { h.version = 9; }, "version 9"},
      {"kind", [](Header& h) { h.kind = static_cast<Kind>(5); }, "unknown kind 5"},
      {"rank", [](Header& h) { h.rank = 9; }, "rank 9"},
      {"dtype", [](Header& h) { h.dtype = 77; }, "unknown dtype 77"},
      {"uuid", [](Header& h) { std::memset(h.uuid, 'x', sizeof(h.uuid)); }, "UUID"},
      {"range", [](Header& h) { h.memory_bytes = h.range_bytes; }, "outside a range"},
      {"chunks", [](Header& h) { h.kind = Kind::kLegacy; }, "chunks for kind 1"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Header h = ChunkHeader(1, 1 << 20);
    c.corrupt(h);
    // Send the raw header only: the receiver must stop at it.
    ASSERT_EQ(send(sender(), &h, sizeof(h), 0), static_cast<ssize_t>(sizeof(h)));
    absl::StatusOr<Message> got = ReceiveMessage(receiver());
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(got.status().message(), HasSubstr(c.message));
    // Drain whatever else may be queued for the next case.
    char drain[4096];
    while (recv(receiver(), drain, sizeof(drain), MSG_DONTWAIT) > 0) {
    }
  }
}

TEST_F(IpcWireTest, ChunkSizesMustAddUp) {
  Header h = ChunkHeader(2, 1 << 20);
  std::vector<int> fds = MakeFds(2);
  const std::vector<uint64_t> sizes = {1 << 20, 1 << 19};
  ASSERT_TRUE(SendMessage(sender(), h, sizes, fds).ok());
  for (int fd : fds) close(fd);
  absl::StatusOr<Message> got = ReceiveMessage(receiver());
  EXPECT_THAT(got.status().message(), HasSubstr("chunks of 1572864 bytes"));
}

TEST_F(IpcWireTest, TruncatedMessageIsDataLoss) {
  const Header h = ChunkHeader(1, 1 << 20);
  ASSERT_EQ(send(sender(), &h, 100, 0), 100);
  CloseSender();
  absl::StatusOr<Message> got = ReceiveMessage(receiver());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(got.status().message(), HasSubstr("after 100 of"));
}

TEST_F(IpcWireTest, SendChecksItsArguments) {
  const Header h = ChunkHeader(2, 1 << 20);
  const std::vector<uint64_t> sizes = {1 << 20};
  EXPECT_EQ(SendMessage(sender(), h, sizes, {}).code(), absl::StatusCode::kInvalidArgument);
  CloseSender();
  EXPECT_FALSE(SendMessage(receiver(), Header(), {}, {}).ok());  // The peer is gone.
}

TEST(IpcWireSocketTest, BadSocketIsAnError) {
  EXPECT_FALSE(SendMessage(-1, Header(), {}, {}).ok());
  EXPECT_FALSE(ReceiveMessage(-1).ok());
}

}  // namespace
}  // namespace genesis::storage::ipc_internal
