// DeferredUnmaps: unmaps of virtual memory that run on a thread of their own.
//
// Memory may only be unmapped once no queued work uses it, and on a GPU the only safe
// test of that, short of knowing every stream that touched it, is to wait for the
// device. Done on the thread that asked (as cudaFree does, and PyTorch's expandable
// segments), that wait stalls the allocating thread, under its pool's lock, for as
// long as the device's queue is deep: milliseconds in training, where kernels run far
// behind the host. Here the caller hands the pieces over and goes on; one worker
// thread, started at the first Post, waits for the device and unmaps them, every batch
// in the order it came, several batches behind one wait where they queued up.
//
// The caller keeps the bookkeeping honest: pieces handed over are pending until the
// worker is done with them. WaitForRange blocks a caller that is about to map where
// pending pieces still are; WaitAll, one that needs their memory back (the device is
// out of memory, or the user emptied the cache). Errors of the unmap function are kept
// (the first of them) until TakeError, since the thread that asked is gone by then.
// Thread-safe.
#ifndef GENESIS_MEMORY_DEFERRED_UNMAPS_H_
#define GENESIS_MEMORY_DEFERRED_UNMAPS_H_

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "genesis/memory/mapping_pieces.h"

namespace genesis::memory {

class DeferredUnmaps {
 public:
  // Does the unmapping of a batch of pieces, on the worker thread: it must not take a
  // lock that a caller of WaitForRange or WaitAll may hold while waiting. Whatever it
  // returns, the pieces are no longer pending afterwards.
  using UnmapFunction = std::function<absl::Status(const std::vector<Piece>&)>;

  explicit DeferredUnmaps(UnmapFunction unmap);
  DeferredUnmaps(const DeferredUnmaps&) = delete;
  DeferredUnmaps& operator=(const DeferredUnmaps&) = delete;
  // Finishes every batch handed over, then stops the worker.
  ~DeferredUnmaps();

  // Hands `pieces` (none of them pending already) over to the worker and returns at once.
  void Post(std::vector<Piece> pieces);

  // Returns once no pending piece overlaps [start, start + bytes).
  void WaitForRange(uintptr_t start, size_t bytes);

  // Returns once nothing is pending.
  void WaitAll();

  // The first error of the unmap function since the last call (OK if none), cleared.
  absl::Status TakeError();

  // Bytes in pending pieces, and the number of batches the worker ran.
  size_t pending_bytes() const;
  size_t batches_run() const;

 private:
  void Work();

  const UnmapFunction unmap_;
  mutable std::mutex mu_;
  std::condition_variable work_;  // Posted to the worker, or stopping.
  std::condition_variable done_;  // The worker finished a batch.
  std::vector<Piece> queue_;      // Handed over, not yet taken by the worker.
  PieceMap pending_;              // Handed over and not unmapped yet (queue_ and more).
  absl::Status error_;
  size_t batches_run_ = 0;
  bool stopping_ = false;
  std::thread worker_;            // Started by the first Post.
};

}  // namespace genesis::memory

#endif  // GENESIS_MEMORY_DEFERRED_UNMAPS_H_
