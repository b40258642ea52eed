#include "genesis/storage/storage.h"

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "genesis/core/absl_compat.h"
#include "genesis/cuda/device_guard.h"
#include "genesis/cuda/device_query.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/pool_registry.h"
#include "genesis/storage/convert.h"
#include "genesis/storage/kernels/cuda_kernels.h"
#include "genesis/storage/kernels/dtype_dispatch.h"
#include "genesis/storage/kernels/fill.h"
#include "genesis/storage/storage_tracker.h"
#include "genesis/storage/strided_copy.h"
#include "genesis/transfer/copy.h"

namespace genesis::storage {
namespace internal {

// The memory under one or more Storage views. Immutable after construction; returns
// the memory (to its pool, or through the external deleter) when the last view goes.
class Buffer {
 public:
  void* base = nullptr;  // Element 0 (aligned).
  size_t nbytes = 0;
  Device device;
  bool pinned = false;
  bool read_only = false;
  size_t alignment = 0;
  CUstream_st* stream = nullptr;
  memory::CachingAllocator* pool = nullptr;  // Null for external memory.
  void* block = nullptr;                      // What the pool gave (base, or before it).
  ExternalDeleter deleter;
  uint64_t track_id = 0;
  std::source_location where;

  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  ~Buffer() {
    UntrackStorage(track_id);
    if (pool != nullptr) {
      const absl::Status status = pool->Free(block);
      if (!status.ok()) {
        // Cannot happen for a block this buffer owns; say so rather than lose it.
        std::fprintf(stderr, "genesis: freeing storage memory failed: %s\n",
                     status.ToString().c_str());
      }
    } else if (deleter) {
      deleter(base);
    }
  }
};

absl::Status CheckElementType(DType dtype, DType requested) {
  if (dtype == requested) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("storage of dtype ", ToAbsl(DTypeName(dtype)),
                                                 " read as ", ToAbsl(DTypeName(requested))));
}

absl::Status CheckValueCount(absl::Span<const int64_t> shape, size_t count) {
  GENESIS_ASSIGN_OR_RETURN(Layout layout, Layout::Contiguous(shape));
  if (static_cast<uint64_t>(layout.numel()) == count) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("shape [", absl::StrJoin(shape, ", "),
                                                 "] has ", layout.numel(),
                                                 " elements, but ", count,
                                                 " values were given"));
}

}  // namespace internal

namespace {

using internal::Buffer;

absl::Status CheckDType(DType dtype) {
  return kernels::CheckDType(dtype, "storage", "dtype");
}

absl::Status CheckOptions(Device device, bool pinned, size_t alignment,
                          CUstream_st* stream) {
  if (alignment != 0 && ((alignment & (alignment - 1)) != 0 || alignment > kMaxAlignment)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "alignment ", alignment, " is not a power of two up to ", kMaxAlignment));
  }
  if (pinned && !device.is_cpu()) {
    return absl::InvalidArgumentError(
        absl::StrCat("pinned memory is host memory; asked for it on ", device.ToString()));
  }
  if (stream != nullptr && !device.is_cuda()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a CUDA stream was given for a storage on ", device.ToString()));
  }
  if (device.is_cuda()) GENESIS_RETURN_IF_ERROR(cuda::CheckDeviceIndex(device.index()));
  return absl::OkStatus();
}

std::string Describe(DType dtype, const Layout& layout) {
  return absl::StrCat(ToAbsl(DTypeName(dtype)), "[", absl::StrJoin(layout.shape(), ", "), "]");
}

void Track(Buffer& buffer, DType dtype, const Layout& layout) {
  if (!internal::TrackingActive()) return;
  buffer.track_id = internal::TrackStorage({.nbytes = buffer.nbytes,
                                            .device = buffer.device,
                                            .pinned = buffer.pinned,
                                            .description = Describe(dtype, layout),
                                            .where = buffer.where});
}

absl::StatusOr<memory::CachingAllocator*> PoolOf(Device device, bool pinned) {
  if (device.is_cpu()) return pinned ? memory::PinnedHostPool() : memory::HostPool();
  return memory::PoolFor(device);
}

// Memory for `nbytes` from the pool of `device`, aligned as asked.
absl::StatusOr<std::shared_ptr<Buffer>> AllocateBuffer(size_t nbytes, Device device,
                                                       const StorageOptions& options,
                                                       std::source_location where) {
  GENESIS_RETURN_IF_ERROR(
      CheckOptions(device, options.pinned, options.alignment, options.stream));
  GENESIS_ASSIGN_OR_RETURN(memory::CachingAllocator * pool, PoolOf(device, options.pinned));
  const size_t alignment = options.alignment != 0 ? options.alignment
                           : device.is_cpu()     ? kDefaultCpuAlignment
                                                 : kDefaultCudaAlignment;
  const auto stream = reinterpret_cast<memory::StreamId>(options.stream);
  GENESIS_ASSIGN_OR_RETURN(void* block, pool->Allocate(nbytes, stream));
  void* base = block;
  if (reinterpret_cast<uintptr_t>(block) % alignment != 0) {
    // Alignments beyond the pool's (512 B): ask for enough to align inside the block.
    GENESIS_RETURN_IF_ERROR(pool->Free(block));
    if (nbytes > SIZE_MAX - alignment) {
      return absl::InvalidArgumentError(absl::StrCat(
          nbytes, " bytes aligned to ", alignment, " overflow the address space"));
    }
    GENESIS_ASSIGN_OR_RETURN(block, pool->Allocate(nbytes + alignment - 1, stream));
    const uintptr_t aligned =
        (reinterpret_cast<uintptr_t>(block) + alignment - 1) & ~(uintptr_t{alignment} - 1);
    base = reinterpret_cast<void*>(aligned);
  }
  auto buffer = std::make_shared<Buffer>();
  buffer->base = base;
  buffer->nbytes = nbytes;
  buffer->device = device;
  buffer->pinned = options.pinned;
  buffer->alignment = alignment;
  buffer->stream = options.stream;
  buffer->pool = pool;
  buffer->block = block;
  buffer->where = where;
  return buffer;
}


// Runs `body` with CUDA device `device` current (directly for the CPU).
template <typename Body>
absl::Status OnDevice(Device device, Body&& body) {
  if (device.is_cpu()) return body();
  GENESIS_ASSIGN_OR_RETURN(cuda::DeviceGuard guard, cuda::DeviceGuard::Create(device.index()));
  return body();
}

// True if the elements `a` and `b` can reach share a byte.
bool Overlap(const Storage& a, const Storage& b) {
  if (!a.SharesMemoryWith(b) || a.numel() == 0 || b.numel() == 0) return false;
  const int64_t a_begin = a.offset() * static_cast<int64_t>(a.itemsize());
  const int64_t a_end = (a.offset() + a.layout().extent()) * static_cast<int64_t>(a.itemsize());
  const int64_t b_begin = b.offset() * static_cast<int64_t>(b.itemsize());
  const int64_t b_end = (b.offset() + b.layout().extent()) * static_cast<int64_t>(b.itemsize());
  return a_begin < b_end && b_begin < a_end;
}

}  // namespace

// ---- Storage: description.

Device Storage::device() const { return buffer_ ? buffer_->device : Device::Cpu(); }
bool Storage::is_pinned() const { return buffer_ && buffer_->pinned; }
bool Storage::is_read_only() const { return buffer_ && buffer_->read_only; }
size_t Storage::size_bytes() const { return buffer_ ? buffer_->nbytes : 0; }
void* Storage::base_ptr() const { return buffer_ ? buffer_->base : nullptr; }
void* Storage::data_ptr() const {
  if (!buffer_) return nullptr;
  return static_cast<char*>(buffer_->base) + offset() * static_cast<int64_t>(itemsize());
}
size_t Storage::alignment() const { return buffer_ ? buffer_->alignment : 0; }
CUstream_st* Storage::stream() const { return buffer_ ? buffer_->stream : nullptr; }
memory::CachingAllocator* Storage::pool() const { return buffer_ ? buffer_->pool : nullptr; }
const void* Storage::pool_block() const { return buffer_ ? buffer_->block : nullptr; }
std::source_location Storage::where() const {
  return buffer_ ? buffer_->where : std::source_location();
}

std::string Storage::ToString() const {
  if (!buffer_) return "undefined storage";
  return absl::StrCat(Describe(dtype_, layout_), " ", device().ToString(),
                      is_pinned() ? " pinned" : "", " (strides [",
                      absl::StrJoin(strides(), ", "), "] offset ", offset(), ")");
}

absl::Status Storage::CheckDefined(std::string_view what) const {
  if (buffer_) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat(ToAbsl(what), " on an undefined storage (default-constructed)"));
}

absl::Status Storage::CheckWritable(std::string_view what) const {
  GENESIS_RETURN_IF_ERROR(CheckDefined(what));
  if (buffer_->read_only) {
    return absl::FailedPreconditionError(
        absl::StrCat(ToAbsl(what), ": ", ToString(), " is read-only"));
  }
  return strided_internal::CheckWritable(layout_, what);
}

// ---- External memory.

absl::StatusOr<Storage> Storage::FromExternal(void* base, size_t nbytes,
                                              const Layout& layout, DType dtype,
                                              Device device, ExternalDeleter deleter,
                                              const ExternalOptions& options,
                                              std::source_location where) {
  auto checked = [&]() -> absl::Status {
    GENESIS_RETURN_IF_ERROR(CheckDType(dtype));
    GENESIS_RETURN_IF_ERROR(CheckOptions(device, options.pinned, 0, options.stream));
    GENESIS_RETURN_IF_ERROR(
        layout.CheckFits(static_cast<int64_t>(nbytes / ItemSize(dtype))));
    if (base == nullptr && layout.numel() > 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "external memory at nullptr for a view of ", layout.numel(), " elements"));
    }
    return absl::OkStatus();
  }();
  if (!checked.ok()) {
    if (deleter) deleter(base);
    return checked;
  }
  auto buffer = std::make_shared<Buffer>();
  buffer->base = base;
  buffer->nbytes = nbytes;
  buffer->device = device;
  buffer->pinned = options.pinned;
  buffer->read_only = options.read_only;
  buffer->alignment = 1;
  buffer->stream = options.stream;
  buffer->deleter = std::move(deleter);
  buffer->where = where;
  Track(*buffer, dtype, layout);
  return Storage(std::move(buffer), layout, dtype);
}

// ---- Views.

absl::StatusOr<Storage> Storage::WithLayout(absl::StatusOr<Layout> layout) const {
  GENESIS_RETURN_IF_ERROR(CheckDefined("making a view"));
  if (!layout.ok()) return layout.status();
  GENESIS_RETURN_IF_ERROR(
      layout->CheckFits(static_cast<int64_t>(buffer_->nbytes / itemsize())));
  return Storage(buffer_, *layout, dtype_);
}

absl::StatusOr<Storage> Storage::View(const Layout& layout) const { return WithLayout(layout); }
absl::StatusOr<Storage> Storage::Slice(int dim, int64_t start, int64_t stop,
                                       int64_t step) const {
  return WithLayout(layout_.Slice(dim, start, stop, step));
}
absl::StatusOr<Storage> Storage::Select(int dim, int64_t index) const {
  return WithLayout(layout_.Select(dim, index));
}
absl::StatusOr<Storage> Storage::Transpose(int dim0, int dim1) const {
  return WithLayout(layout_.Transpose(dim0, dim1));
}
absl::StatusOr<Storage> Storage::Permute(absl::Span<const int> dims) const {
  return WithLayout(layout_.Permute(dims));
}
absl::StatusOr<Storage> Storage::Reshape(absl::Span<const int64_t> shape) const {
  return WithLayout(layout_.Reshape(shape));
}
absl::StatusOr<Storage> Storage::Expand(absl::Span<const int64_t> shape) const {
  return WithLayout(layout_.Expand(shape));
}
absl::StatusOr<Storage> Storage::Unsqueeze(int dim) const {
  return WithLayout(layout_.Unsqueeze(dim));
}
absl::StatusOr<Storage> Storage::Squeeze(int dim) const {
  return WithLayout(layout_.Squeeze(dim));
}

// ---- Copies.

namespace {
std::atomic<int> host_copy_threads{1};
}  // namespace

absl::Status SetHostCopyThreads(int threads) {
  if (threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("SetHostCopyThreads: ", threads, " threads (0 means one per core)"));
  }
  host_copy_threads.store(threads, std::memory_order_relaxed);
  return absl::OkStatus();
}

int HostCopyThreads() { return host_copy_threads.load(std::memory_order_relaxed); }

absl::StatusOr<Storage> Storage::Contiguous() const {
  GENESIS_RETURN_IF_ERROR(CheckDefined("Contiguous"));
  if (is_contiguous()) return *this;
  return Clone();
}

absl::StatusOr<Storage> Storage::To(Device device, const StorageOptions& options) const {
  GENESIS_RETURN_IF_ERROR(CheckDefined("To(device)"));
  GENESIS_ASSIGN_OR_RETURN(Storage out,
                           Empty(shape(), dtype_, device, options, buffer_->where));
  GENESIS_RETURN_IF_ERROR(out.CopyFrom(*this));
  return out;
}

absl::StatusOr<Storage> Storage::To(DType dtype) const {
  GENESIS_RETURN_IF_ERROR(CheckDefined("To(dtype)"));
  GENESIS_RETURN_IF_ERROR(CheckDType(dtype));
  const StorageOptions options{.pinned = is_pinned(), .stream = stream()};
  GENESIS_ASSIGN_OR_RETURN(Storage out,
                           Empty(shape(), dtype, device(), options, buffer_->where));
  GENESIS_RETURN_IF_ERROR(out.ConvertFrom(*this));
  return out;
}

absl::StatusOr<Storage> Storage::Clone() const {
  GENESIS_RETURN_IF_ERROR(CheckDefined("Clone"));
  return To(device(), {.pinned = is_pinned(),
                       .alignment = buffer_->pool ? buffer_->alignment : 0,
                       .stream = stream()});
}

absl::Status Storage::CopyFrom(const Storage& src) { return CopyOrConvert(src, false); }
absl::Status Storage::ConvertFrom(const Storage& src) { return CopyOrConvert(src, true); }

absl::Status Storage::CheckCopyFrom(const Storage& src, bool convert) const {
  const std::string_view function = convert ? "ConvertFrom" : "CopyFrom";
  GENESIS_RETURN_IF_ERROR(CheckWritable(function));
  GENESIS_RETURN_IF_ERROR(src.CheckDefined(function));
  GENESIS_RETURN_IF_ERROR(strided_internal::CheckSameShape(src.layout_, layout_, function));
  if (!convert && src.dtype_ != dtype_) {
    return absl::InvalidArgumentError(absl::StrCat(
        ToAbsl(function), ": source dtype ", ToAbsl(DTypeName(src.dtype_)),
        " differs from destination dtype ", ToAbsl(DTypeName(dtype_)),
        " (ConvertFrom converts)"));
  }
  if (Overlap(src, *this)) {
    return absl::InvalidArgumentError(absl::StrCat(ToAbsl(function), ": source ",
                                                   src.ToString(), " and destination ",
                                                   ToString(), " overlap in memory"));
  }
  return absl::OkStatus();
}

absl::Status Storage::CopyOrConvert(const Storage& src, bool convert) {
  GENESIS_RETURN_IF_ERROR(CheckCopyFrom(src, convert));
  if (numel() == 0) return absl::OkStatus();

  if (src.device() != device()) {
    // Move the bytes once, contiguous, in the source dtype; convert on the GPU side.
    Storage moved = src;
    if (convert && src.dtype_ != dtype_ && src.device().is_cuda()) {
      GENESIS_ASSIGN_OR_RETURN(moved, src.To(dtype_));
    } else if (!src.is_contiguous()) {
      GENESIS_ASSIGN_OR_RETURN(moved, src.Contiguous());
    }
    Storage target = *this;
    const bool direct = is_contiguous() && moved.dtype_ == dtype_;
    if (!direct) {
      GENESIS_ASSIGN_OR_RETURN(
          target, Empty(shape(), moved.dtype_, device(), {.stream = stream()}, buffer_->where));
    }
    // A GPU source is read on its own stream: wait for its work first.
    GENESIS_RETURN_IF_ERROR(moved.Synchronize());
    CUstream_st* copy_stream = device().is_cuda() ? stream() : moved.stream();
    GENESIS_RETURN_IF_ERROR(transfer::CopyBytes(target.data_ptr(), device(),
                                                moved.data_ptr(), moved.device(),
                                                moved.nbytes(), copy_stream));
    if (direct) return absl::OkStatus();
    return CopyOrConvert(target, convert);
  }

  if (device().is_cuda() && src.stream() != stream()) {
    // Read on this storage's stream: after the source's queued work, and recorded so
    // the source's memory is not reused before this stream is done with it.
    GENESIS_RETURN_IF_ERROR(src.Synchronize());
    GENESIS_RETURN_IF_ERROR(src.RecordStream(stream()));
  }
  const void* src_base = src.base_ptr();
  void* dst_base = base_ptr();
  return OnDevice(device(), [&]() -> absl::Status {
    if (device().is_cpu()) {
      if (src.dtype_ == dtype_) {
        return CopyStrided(src_base, src.layout_, dst_base, layout_, itemsize(),
                           HostCopyThreads());
      }
      return ConvertStrided(src_base, src.layout_, src.dtype_, dst_base, layout_, dtype_,
                            HostCopyThreads());
    }
    if (src.dtype_ == dtype_) {
      return kernels::CopyStridedCuda(src_base, src.layout_, dst_base, layout_, itemsize(),
                                      stream());
    }
    return kernels::ConvertCuda(src_base, src.layout_, src.dtype_, dst_base, layout_,
                                dtype_, stream());
  });
}

absl::Status Storage::Fill(double value) {
  GENESIS_RETURN_IF_ERROR(CheckWritable("Fill"));
  if (!is_contiguous()) {
    // One element with the value, broadcast over the view.
    GENESIS_ASSIGN_OR_RETURN(
        Storage one, genesis::storage::Full({}, value, dtype_, device(),
                                            {.stream = stream()}, buffer_->where));
    GENESIS_ASSIGN_OR_RETURN(Storage all, one.Expand(shape()));
    return CopyFrom(all);
  }
  GENESIS_ASSIGN_OR_RETURN(const auto pattern, kernels::ScalarPattern(value, dtype_));
  return OnDevice(device(), [&]() -> absl::Status {
    if (device().is_cpu()) {
      return kernels::FillHost(data_ptr(), numel(), pattern.data(), itemsize());
    }
    return kernels::FillCuda(data_ptr(), numel(), pattern.data(), itemsize(), stream());
  });
}

absl::Status Storage::CopyToHost(void* dst, size_t dst_bytes) const {
  GENESIS_RETURN_IF_ERROR(CheckDefined("CopyToHost"));
  if (dst_bytes != nbytes()) {
    return absl::InvalidArgumentError(absl::StrCat("CopyToHost: ", ToString(), " holds ",
                                                   nbytes(), " bytes, the destination ",
                                                   dst_bytes));
  }
  if (numel() == 0) return absl::OkStatus();
  if (dst == nullptr) return absl::InvalidArgumentError("CopyToHost: destination is null");
  if (device().is_cpu()) {
    CopyStridedToContiguous(base_ptr(), layout_, itemsize(), dst, HostCopyThreads());
    return absl::OkStatus();
  }
  GENESIS_ASSIGN_OR_RETURN(const Storage contiguous, Contiguous());
  return transfer::CopyBytes(dst, Device::Cpu(), contiguous.data_ptr(), device(), nbytes(),
                             stream());
}

absl::Status Storage::RecordStream(CUstream_st* stream) const {
  GENESIS_RETURN_IF_ERROR(CheckDefined("RecordStream"));
  if (!device().is_cuda() || buffer_->pool == nullptr || stream == buffer_->stream) {
    return absl::OkStatus();
  }
  return buffer_->pool->RecordStream(buffer_->block, reinterpret_cast<memory::StreamId>(stream));
}

absl::Status Storage::Synchronize() const {
  GENESIS_RETURN_IF_ERROR(CheckDefined("Synchronize"));
  return transfer::Synchronize(device(), stream());
}

// ---- Sizes.

namespace {

absl::StatusOr<Layout> ContiguousLayout(absl::Span<const int64_t> shape, DType dtype) {
  GENESIS_RETURN_IF_ERROR(CheckDType(dtype));
  GENESIS_ASSIGN_OR_RETURN(Layout layout, Layout::Contiguous(shape));
  constexpr int64_t kMaxBytes = int64_t{1} << 62;
  if (layout.numel() > kMaxBytes / static_cast<int64_t>(ItemSize(dtype))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shape [", absl::StrJoin(shape, ", "), "] of ", ToAbsl(DTypeName(dtype)),
        " needs more than 2^62 bytes"));
  }
  return layout;
}

}  // namespace

absl::StatusOr<size_t> ContiguousBytes(absl::Span<const int64_t> shape, DType dtype) {
  GENESIS_ASSIGN_OR_RETURN(const Layout layout, ContiguousLayout(shape, dtype));
  return static_cast<size_t>(layout.numel()) * ItemSize(dtype);
}

// ---- Factories.

absl::StatusOr<Storage> Empty(absl::Span<const int64_t> shape, DType dtype, Device device,
                              const StorageOptions& options, std::source_location where) {
  GENESIS_ASSIGN_OR_RETURN(const Layout layout, ContiguousLayout(shape, dtype));
  const size_t nbytes = static_cast<size_t>(layout.numel()) * ItemSize(dtype);
  GENESIS_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> buffer,
                           AllocateBuffer(nbytes, device, options, where));
  Track(*buffer, dtype, layout);
  return Storage(std::move(buffer), layout, dtype);
}

absl::StatusOr<Storage> Full(absl::Span<const int64_t> shape, double value, DType dtype,
                             Device device, const StorageOptions& options,
                             std::source_location where) {
  GENESIS_ASSIGN_OR_RETURN(Storage out, Empty(shape, dtype, device, options, where));
  GENESIS_RETURN_IF_ERROR(out.Fill(value));
  return out;
}

absl::StatusOr<Storage> Zeros(absl::Span<const int64_t> shape, DType dtype, Device device,
                              const StorageOptions& options, std::source_location where) {
  return Full(shape, 0.0, dtype, device, options, where);
}

absl::StatusOr<Storage> Ones(absl::Span<const int64_t> shape, DType dtype, Device device,
                             const StorageOptions& options, std::source_location where) {
  return Full(shape, 1.0, dtype, device, options, where);
}

absl::StatusOr<Storage> Arange(double start, double stop, double step, DType dtype,
                               Device device, const StorageOptions& options,
                               std::source_location where) {
  if (!std::isfinite(start) || !std::isfinite(stop) || !std::isfinite(step) || step == 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "Arange(start %g, stop %g, step %g): arguments must be finite and step nonzero",
        start, stop, step));
  }
  const double count = std::ceil((stop - start) / step);
  constexpr double kMaxCount = static_cast<double>(int64_t{1} << 48);
  if (count > kMaxCount) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "Arange(start %g, stop %g, step %g) would have %g elements, more than 2^48", start,
        stop, step, count));
  }
  const int64_t n = count > 0 ? static_cast<int64_t>(count) : 0;
  GENESIS_ASSIGN_OR_RETURN(Storage out, Empty({n}, dtype, device, options, where));
  GENESIS_RETURN_IF_ERROR(OnDevice(device, [&]() -> absl::Status {
    if (device.is_cpu()) return kernels::ArangeHost(out.data_ptr(), n, start, step, dtype);
    return kernels::ArangeCuda(out.data_ptr(), n, start, step, dtype, out.stream());
  }));
  return out;
}

absl::StatusOr<Storage> CreateStorage(const void* host_data, absl::Span<const int64_t> shape,
                                      DType dtype, Device device,
                                      const StorageOptions& options,
                                      std::source_location where) {
  GENESIS_ASSIGN_OR_RETURN(Storage out, Empty(shape, dtype, device, options, where));
  GENESIS_RETURN_IF_ERROR(transfer::CopyBytes(out.data_ptr(), device, host_data,
                                              Device::Cpu(), out.nbytes(), out.stream()));
  return out;
}

}  // namespace genesis::storage
