#include "genesis/memory/host_virtual_memory.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <functional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "genesis/core/status.h"

namespace genesis::memory {
namespace {

absl::Status Errno(int err, const std::string& what) {
  const std::string text = absl::StrCat(what, ": ", std::strerror(err));
  if (err == ENOMEM || err == ENOSPC) return absl::ResourceExhaustedError(text);
  return absl::InternalError(text);
}

// Maps `bytes` at `p` back to an inaccessible reservation.
bool ReserveAt(void* p, size_t bytes) {
  return mmap(p, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
              -1, 0) != MAP_FAILED;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HostVirtualMemory>> HostVirtualMemory::Create(
    size_t granularity) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  if (!std::has_single_bit(granularity) || granularity < page) {
    return absl::InvalidArgumentError(absl::StrCat(
        "HostVirtualMemory: granularity ", granularity,
        " must be a power of two and a multiple of the page size (", page, ")"));
  }
  const int fd = memfd_create("genesis-virtual-memory", MFD_CLOEXEC);
  if (fd < 0) return Errno(errno, "HostVirtualMemory: memfd_create");
  return std::unique_ptr<HostVirtualMemory>(new HostVirtualMemory(fd, granularity));
}

HostVirtualMemory::HostVirtualMemory(int fd, size_t granularity)
    : fd_(fd), granularity_(granularity) {}

HostVirtualMemory::~HostVirtualMemory() {
  for (const auto& [base, bytes] : reservations_) {
    munmap(reinterpret_cast<void*>(base), bytes);
  }
  close(fd_);
}

size_t HostVirtualMemory::mapped_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return slot_of_.size() * granularity_;
}

absl::StatusOr<void*> HostVirtualMemory::Reserve(size_t bytes) {
  if (bytes == 0 || bytes % granularity_ != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "HostVirtualMemory::Reserve: ", bytes, " bytes is not a positive multiple of ",
        granularity_));
  }
  // Over-reserve by one chunk so that an aligned range fits, then trim both ends.
  size_t total = 0;
  if (__builtin_add_overflow(bytes, granularity_, &total)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("HostVirtualMemory::Reserve: ", bytes, " bytes"));
  }
  void* raw = mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
  if (raw == MAP_FAILED) {
    return Errno(errno, absl::StrCat("HostVirtualMemory::Reserve(", bytes, ")"));
  }
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t base = (start + granularity_ - 1) & ~(granularity_ - 1);
  if (base > start) munmap(raw, base - start);
  if (const uintptr_t end = start + total; end > base + bytes) {
    munmap(reinterpret_cast<void*>(base + bytes), end - (base + bytes));
  }
  std::lock_guard<std::mutex> lock(mu_);
  reservations_[base] = bytes;
  return reinterpret_cast<void*>(base);
}

void HostVirtualMemory::Unreserve(void* base, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = reservations_.find(reinterpret_cast<uintptr_t>(base));
  if (it == reservations_.end() || it->second != bytes) return;
  const auto start = reinterpret_cast<uintptr_t>(base);
  for (auto s = slot_of_.begin(); s != slot_of_.end();) {
    if (s->first >= start && s->first - start < bytes) {
      ReturnSlotLocked(s->second);
      slot_of_.erase(s++);
    } else {
      ++s;
    }
  }
  pieces_.EraseWithin(start, bytes);
  munmap(base, bytes);
  reservations_.erase(it);
}

uintptr_t HostVirtualMemory::ReservationBaseLocked(uintptr_t p) const {
  for (const auto& [base, size] : reservations_) {
    if (p >= base && p - base < size) return base;
  }
  return p;
}

bool HostVirtualMemory::ReservedLocked(uintptr_t p, size_t bytes) const {
  for (const auto& [base, size] : reservations_) {
    if (p >= base && p - base <= size && bytes <= size - (p - base)) return true;
  }
  return false;
}

absl::StatusOr<size_t> HostVirtualMemory::TakeSlotLocked() {
  if (!free_slots_.empty()) {
    std::pop_heap(free_slots_.begin(), free_slots_.end(), std::greater<>());
    const size_t slot = free_slots_.back();
    free_slots_.pop_back();
    return slot;
  }
  const size_t slot = file_slots_;
  if (ftruncate(fd_, static_cast<off_t>((slot + 1) * granularity_)) != 0) {
    return Errno(errno, "HostVirtualMemory: growing the memfd");
  }
  ++file_slots_;
  return slot;
}

void HostVirtualMemory::ReturnSlotLocked(size_t slot) {
  // Punching the pages out returns them to the system; the slot itself is reused.
  fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
            static_cast<off_t>(slot * granularity_), static_cast<off_t>(granularity_));
  free_slots_.push_back(slot);
  std::push_heap(free_slots_.begin(), free_slots_.end(), std::greater<>());
}

absl::Status HostVirtualMemory::MapPieces(void* ptr, size_t bytes, const PieceCut& cut) {
  const auto start = reinterpret_cast<uintptr_t>(ptr);
  GENESIS_RETURN_IF_ERROR(CheckMaxPiece(cut.max_piece, granularity_, "HostVirtualMemory::Map"));
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes == 0 || start % granularity_ != 0 || bytes % granularity_ != 0 ||
      !ReservedLocked(start, bytes)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "HostVirtualMemory::Map(%p, %d): not a chunk-aligned part of a reservation", ptr,
        bytes));
  }
  for (uintptr_t p = start; p < start + bytes; p += granularity_) {
    if (slot_of_.contains(p)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "HostVirtualMemory::Map(%p, %d): %#x is already mapped", ptr, bytes, p));
    }
  }
  // Runs of consecutive slots are mapped with one call.
  absl::Status status;
  uintptr_t p = start;
  while (p < start + bytes && status.ok()) {
    absl::StatusOr<size_t> first = TakeSlotLocked();
    if (!first.ok()) {
      status = first.status();
      break;
    }
    size_t n = 1;
    slot_of_[p] = *first;
    while (p + n * granularity_ < start + bytes) {
      absl::StatusOr<size_t> next = TakeSlotLocked();
      if (!next.ok()) {
        status = next.status();
        break;
      }
      if (*next != *first + n) {
        ReturnSlotLocked(*next);
        break;
      }
      slot_of_[p + n * granularity_] = *next;
      ++n;
    }
    if (mmap(reinterpret_cast<void*>(p), n * granularity_, PROT_READ | PROT_WRITE,
             MAP_SHARED | MAP_FIXED, fd_,
             static_cast<off_t>(*first * granularity_)) == MAP_FAILED) {
      status = Errno(errno, absl::StrFormat("HostVirtualMemory::Map(%p, %d)", ptr, bytes));
      // The chunks of this run are not mapped: forget them here, unmap the rest below.
      for (size_t i = 0; i < n; ++i) {
        ReturnSlotLocked(slot_of_[p + i * granularity_]);
        slot_of_.erase(p + i * granularity_);
      }
      break;
    }
    p += n * granularity_;
  }
  if (!status.ok()) {
    for (uintptr_t q = start; q < p; q += granularity_) {
      ReturnSlotLocked(slot_of_[q]);
      slot_of_.erase(q);
    }
    if (p > start) ReserveAt(ptr, p - start);
    return status;
  }
  for (const Piece& piece :
       SplitIntoPieces(ReservationBaseLocked(start), start, bytes, granularity_, cut)) {
    pieces_.Insert(piece);
  }
  return status;
}

std::pair<uintptr_t, uintptr_t> HostVirtualMemory::PieceAt(uintptr_t p) const {
  std::lock_guard<std::mutex> lock(mu_);
  return pieces_.BoundsAt(p, granularity_);
}

absl::Status HostVirtualMemory::Unmap(void* ptr, size_t bytes) {
  const auto start = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes == 0 || start % granularity_ != 0 || bytes % granularity_ != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "HostVirtualMemory::Unmap(%p, %d): not chunk-aligned", ptr, bytes));
  }
  GENESIS_ASSIGN_OR_RETURN(std::vector<Piece> tiling,
                           pieces_.Tiling(start, bytes, "HostVirtualMemory::Unmap"));
  if (!ReserveAt(ptr, bytes)) {
    return Errno(errno, absl::StrFormat("HostVirtualMemory::Unmap(%p, %d)", ptr, bytes));
  }
  for (uintptr_t p = start; p < start + bytes; p += granularity_) {
    auto it = slot_of_.find(p);
    ReturnSlotLocked(it->second);
    slot_of_.erase(it);
  }
  for (const Piece& piece : tiling) pieces_.Erase(piece.start);
  return absl::OkStatus();
}

}  // namespace genesis::memory
