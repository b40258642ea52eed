#include "genesis/storage/internal/ipc_wire.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "genesis/core/absl_compat.h"
#include "genesis/core/dtype.h"
#include "genesis/core/status.h"

namespace genesis::storage::ipc_internal {
namespace {

using internal::PosixError;
using internal::ScopedFd;

// One batch of chunk sizes; its descriptors travel with its first byte.
struct Batch {
  uint32_t count = 0;
  uint32_t reserved = 0;
  uint64_t bytes[kFdsPerBatch] = {};
};

// Sends all `n` bytes, attaching `fds` to the first sendmsg.
absl::Status SendAll(int socket, const void* data, size_t n, absl::Span<const int> fds) {
  const char* p = static_cast<const char*>(data);
  bool attach = !fds.empty();
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kFdsPerBatch)];
  while (n > 0) {
    iovec iov{const_cast<char*>(p), n};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (attach) {
      const size_t fd_bytes = sizeof(int) * fds.size();
      std::memset(control, 0, sizeof(control));
      msg.msg_control = control;
      msg.msg_controllen = CMSG_SPACE(fd_bytes);
      cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
      cmsg->cmsg_level = SOL_SOCKET;
      cmsg->cmsg_type = SCM_RIGHTS;
      cmsg->cmsg_len = CMSG_LEN(fd_bytes);
      std::memcpy(CMSG_DATA(cmsg), fds.data(), fd_bytes);
    }
    const ssize_t sent = sendmsg(socket, &msg, MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR) continue;
      return PosixError(errno, "sending a CUDA storage over the socket");
    }
    attach = false;
    p += sent;
    n -= static_cast<size_t>(sent);
  }
  return absl::OkStatus();
}

// Receives exactly `n` bytes, keeping every descriptor that arrives with them.
absl::Status ReceiveAll(int socket, void* data, size_t n, std::vector<ScopedFd>* fds) {
  char* p = static_cast<char*>(data);
  size_t received = 0;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kFdsPerBatch)];
  while (received < n) {
    iovec iov{p + received, n - received};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    const ssize_t got = recvmsg(socket, &msg, MSG_CMSG_CLOEXEC);
    if (got < 0) {
      if (errno == EINTR) continue;
      return PosixError(errno, "receiving a CUDA storage from the socket");
    }
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        fds->emplace_back(fd);
      }
    }
    if ((msg.msg_flags & MSG_CTRUNC) != 0) {
      return absl::InvalidArgumentError(
          "receiving a CUDA storage: more descriptors arrived than a batch may carry");
    }
    if (got == 0) {
      return absl::DataLossError(absl::StrCat(
          "receiving a CUDA storage: connection closed after ", received, " of ", n,
          " bytes"));
    }
    received += static_cast<size_t>(got);
  }
  return absl::OkStatus();
}

absl::Status Invalid(std::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("received CUDA storage message: ", ToAbsl(what)));
}

absl::Status Validate(const Header& h) {
  if (h.magic != kMagic) return Invalid(absl::StrCat("bad magic ", h.magic));
  if (h.version != kVersion) {
    return Invalid(absl::StrCat("version ", h.version, ", expected ", kVersion));
  }
  if (static_cast<uint32_t>(h.kind) > static_cast<uint32_t>(Kind::kChunks)) {
    return Invalid(absl::StrCat("unknown kind ", static_cast<uint32_t>(h.kind)));
  }
  if (h.rank < 0 || h.rank > kMaxDims) return Invalid(absl::StrCat("rank ", h.rank));
  if (h.dtype > 255 || ItemSize(static_cast<DType>(h.dtype)) == 0) {
    return Invalid(absl::StrCat("unknown dtype ", h.dtype));
  }
  if (std::memchr(h.uuid, 0, sizeof(h.uuid)) == nullptr) {
    return Invalid("device UUID not terminated");
  }
  if (h.num_chunks > kMaxChunks) return Invalid(absl::StrCat(h.num_chunks, " chunks"));
  if ((h.kind == Kind::kChunks) != (h.num_chunks > 0)) {
    return Invalid(absl::StrCat(h.num_chunks, " chunks for kind ",
                                static_cast<uint32_t>(h.kind)));
  }
  if (h.range_offset > h.range_bytes || h.memory_bytes > h.range_bytes - h.range_offset) {
    return Invalid(absl::StrCat("memory of ", h.memory_bytes, " bytes at offset ",
                                h.range_offset, " outside a range of ", h.range_bytes));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SendMessage(int socket, const Header& header,
                         absl::Span<const uint64_t> chunk_bytes, absl::Span<const int> fds) {
  if (chunk_bytes.size() != header.num_chunks ||
      (!fds.empty() && fds.size() != chunk_bytes.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SendMessage: ", header.num_chunks, " chunks in the header, ", chunk_bytes.size(),
        " sizes and ", fds.size(), " descriptors"));
  }
  GENESIS_RETURN_IF_ERROR(SendAll(socket, &header, sizeof(header), {}));
  for (size_t first = 0; first < chunk_bytes.size(); first += kFdsPerBatch) {
    Batch batch;
    batch.count = static_cast<uint32_t>(
        std::min<size_t>(kFdsPerBatch, chunk_bytes.size() - first));
    std::copy_n(chunk_bytes.begin() + first, batch.count, batch.bytes);
    const absl::Span<const int> batch_fds =
        fds.empty() ? absl::Span<const int>() : fds.subspan(first, batch.count);
    GENESIS_RETURN_IF_ERROR(SendAll(socket, &batch, sizeof(batch), batch_fds));
  }
  return absl::OkStatus();
}

absl::StatusOr<Message> ReceiveMessage(int socket) {
  Message message;
  GENESIS_RETURN_IF_ERROR(ReceiveAll(socket, &message.header, sizeof(Header), &message.fds));
  const Header& h = message.header;
  GENESIS_RETURN_IF_ERROR(Validate(h));
  uint64_t total = 0;
  while (message.chunk_bytes.size() < h.num_chunks) {
    Batch batch;
    GENESIS_RETURN_IF_ERROR(ReceiveAll(socket, &batch, sizeof(batch), &message.fds));
    if (batch.count == 0 || batch.count > kFdsPerBatch ||
        batch.count > h.num_chunks - message.chunk_bytes.size()) {
      return Invalid(absl::StrCat("batch of ", batch.count, " chunks"));
    }
    for (uint32_t i = 0; i < batch.count; ++i) {
      if (batch.bytes[i] == 0 || batch.bytes[i] > h.range_bytes - total) {
        return Invalid(absl::StrCat("chunk of ", batch.bytes[i], " bytes"));
      }
      total += batch.bytes[i];
      message.chunk_bytes.push_back(batch.bytes[i]);
    }
  }
  if (h.kind == Kind::kChunks && total != h.range_bytes) {
    return Invalid(absl::StrCat("chunks of ", total, " bytes for a range of ", h.range_bytes));
  }
  const size_t want_fds = h.kind == Kind::kChunks ? h.num_chunks : 0;
  if (message.fds.size() != want_fds) {
    return Invalid(absl::StrCat(message.fds.size(), " descriptors, expected ", want_fds));
  }
  return message;
}

}  // namespace genesis::storage::ipc_internal
