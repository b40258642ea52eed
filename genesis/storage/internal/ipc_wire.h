// The wire format of cuda_ipc.h: what one process sends another over a Unix-domain
// socket to share a CUDA storage, with file descriptors passed as SCM_RIGHTS. Plain
// POSIX, no CUDA, so it is tested on any machine. Not part of the public API.
//
// A message is one Header, then, if num_chunks > 0, batches of up to kFdsPerBatch chunk
// sizes, each batch carrying that many descriptors (kChunks) or none (other kinds).
#ifndef GENESIS_STORAGE_INTERNAL_IPC_WIRE_H_
#define GENESIS_STORAGE_INTERNAL_IPC_WIRE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "genesis/storage/internal/posix_error.h"
#include "genesis/storage/layout.h"

namespace genesis::storage::ipc_internal {

inline constexpr uint32_t kMagic = 0x43504947;  // "GIPC" in memory order.
inline constexpr uint32_t kVersion = 1;
inline constexpr uint32_t kFdsPerBatch = 128;
// More chunks than any storage needs (2^20 chunks of 2 MiB is 2 TiB).
inline constexpr uint32_t kMaxChunks = 1u << 20;

enum class Kind : uint32_t {
  kEmpty = 0,   // A storage without bytes: nothing to map.
  kLegacy = 1,  // cudaIpcMemHandle_t of a cudaMalloc allocation.
  kChunks = 2,  // cuMemCreate chunks (expandable segments), one descriptor each.
};

struct Header {
  uint32_t magic = kMagic;
  uint32_t version = kVersion;
  Kind kind = Kind::kEmpty;
  int32_t device = 0;       // The sender's ordinal.
  char uuid[48] = {};       // The device's "GPU-..." UUID, NUL-terminated.
  uint32_t dtype = 0;       // genesis::DType.
  int32_t rank = 0;
  int64_t shape[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};
  int64_t offset = 0;        // Elements, from the storage's memory start.
  uint64_t memory_bytes = 0;  // Storage::size_bytes().
  uint64_t range_offset = 0;  // Bytes from the shared range's start to the memory.
  uint64_t range_bytes = 0;   // Bytes of the shared range.
  uint32_t num_chunks = 0;
  uint8_t legacy_handle[64] = {};
};

struct Message {
  Header header;
  std::vector<uint64_t> chunk_bytes;        // num_chunks entries.
  std::vector<internal::ScopedFd> fds;      // num_chunks for kChunks, else none.
};

// Sends `header` and the chunk sizes, with `fds` (empty, or one per chunk). Retries on
// EINTR; the errno text on failure (EPIPE if the peer is gone; SIGPIPE is not raised).
absl::Status SendMessage(int socket, const Header& header,
                         absl::Span<const uint64_t> chunk_bytes, absl::Span<const int> fds);

// Receives one message. Errors, with every received descriptor closed: the errno text;
// DataLoss "connection closed after X of Y bytes" for a peer that went away
// mid-message; InvalidArgument for a bad magic, version, kind, rank, dtype or chunk
// count, chunk sizes that do not add up to range_bytes, or descriptors that do not
// match the kind, each naming the value.
absl::StatusOr<Message> ReceiveMessage(int socket);

}  // namespace genesis::storage::ipc_internal

#endif  // GENESIS_STORAGE_INTERNAL_IPC_WIRE_H_
