#include "genesis/memory/deferred_unmaps.h"

#include <utility>

namespace genesis::memory {

DeferredUnmaps::DeferredUnmaps(UnmapFunction unmap) : unmap_(std::move(unmap)) {}

DeferredUnmaps::~DeferredUnmaps() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_.notify_one();
  if (worker_.joinable()) worker_.join();
}

void DeferredUnmaps::Post(std::vector<Piece> pieces) {
  if (pieces.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Piece& piece : pieces) {
      pending_.Insert(piece);
      queue_.push_back(piece);
    }
    if (!worker_.joinable()) worker_ = std::thread([this] { Work(); });
  }
  work_.notify_one();
}

void DeferredUnmaps::Work() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    // Stopping still finishes what was handed over.
    if (queue_.empty()) return;
    std::vector<Piece> batch = std::exchange(queue_, {});
    lock.unlock();
    absl::Status status = unmap_(batch);
    lock.lock();
    if (!status.ok() && error_.ok()) error_ = std::move(status);
    for (const Piece& piece : batch) pending_.Erase(piece.start);
    ++batches_run_;
    done_.notify_all();
  }
}

void DeferredUnmaps::WaitForRange(uintptr_t start, size_t bytes) {
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [&] { return !pending_.Overlaps(start, bytes); });
}

void DeferredUnmaps::WaitAll() {
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [this] { return pending_.empty(); });
}

absl::Status DeferredUnmaps::TakeError() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(error_, absl::OkStatus());
}

size_t DeferredUnmaps::pending_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_.mapped_bytes();
}

size_t DeferredUnmaps::batches_run() const {
  std::lock_guard<std::mutex> lock(mu_);
  return batches_run_;
}

}  // namespace genesis::memory
