// Sharing CUDA storages between processes (F6, the GPU half): the memory is shared,
// not copied. A storage goes over a connected Unix-domain socket (socketpair, or
// AF_UNIX between unrelated processes of one machine):
//
//   // Process A:
//   GENESIS_RETURN_IF_ERROR(SendCudaStorage(socket, weights));
//   // Process B:
//   GENESIS_ASSIGN_OR_RETURN(Storage weights, ReceiveCudaStorage(socket));
//
// Both kinds of pool memory work. Memory from classic segments (cudaMalloc) travels as a
// cudaIpcMemHandle_t of its allocation plus the storage's offset inside it, since CUDA
// IPC shares whole allocations and pool blocks start anywhere in one; the receiver opens
// each allocation once per process, however many storages of it arrive. Memory from
// expandable segments (cuMemCreate chunks mapped into one address range) travels as one
// POSIX file descriptor per chunk the storage touches (SCM_RIGHTS), which the receiver
// maps side by side into an address range of its own. The view (shape, strides, offset,
// dtype) travels too, and the device is identified by its UUID, so differing
// CUDA_VISIBLE_DEVICES orders are fine.
//
// Lifetime: as with all CUDA IPC, the sender must keep its storage alive until the
// receiver has dropped every storage it made from it (agree on a message for that); the
// receiver's storages unmap the memory when the last of them goes. Ordering: the sender
// waits for the storage's stream before sending, so the receiver sees finished data;
// later writes need the processes' own synchronisation.
#ifndef GENESIS_STORAGE_CUDA_IPC_H_
#define GENESIS_STORAGE_CUDA_IPC_H_

#include <source_location>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "genesis/storage/storage.h"

namespace genesis::storage {

// Shares `storage` (on cuda:N) with the process at the other end of `socket`.
// InvalidArgument for a storage that is not on a GPU or is undefined; FailedPrecondition
// for memory CUDA cannot share (managed memory, or chunks made without a shareable
// handle type); the socket's errno text if sending fails; FailedPrecondition in the
// CPU-only build.
absl::Status SendCudaStorage(int socket, const Storage& storage);

// Receives a storage sent with SendCudaStorage. Errors: those of the wire format
// (malformed or truncated messages, naming the value); NotFound if no device here has
// the sender's device UUID; the CUDA error if opening or mapping the memory fails;
// FailedPrecondition in the CPU-only build. Nothing is leaked on error (descriptors
// received are closed). Memory opened with cudaIpcOpenMemHandle is marked written for
// compute-sanitizer (sanitizer_marks.h): the sender wrote it, out of this process's view.
absl::StatusOr<Storage> ReceiveCudaStorage(
    int socket, std::source_location where = std::source_location::current());

}  // namespace genesis::storage

#endif  // GENESIS_STORAGE_CUDA_IPC_H_
