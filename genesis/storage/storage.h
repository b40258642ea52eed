// Storage: a typed, reference-counted buffer on a device (the CPU, pinned CPU memory or
// cuda:N), seen through a view (shape, strides, offset), and the factories that make
// one. This is what tensors sit on.
//
//   GENESIS_ASSIGN_OR_RETURN(Storage x, Zeros({4096, 4096}, DType::kFloat32,
//                                             Device::Cuda(0)));
//   GENESIS_ASSIGN_OR_RETURN(Storage t, x.Transpose(0, 1));   // a view: no copy
//   GENESIS_ASSIGN_OR_RETURN(Storage c, t.Contiguous());      // a CUDA kernel
//   GENESIS_ASSIGN_OR_RETURN(Storage h, c.To(DType::kBFloat16));
//   GENESIS_ASSIGN_OR_RETURN(Storage back, h.To(Device::Cpu()));
//
// Memory. A storage's memory comes from the process's caching pools
// (genesis/memory/pool_registry.h): the host pool for the CPU, the pinned pool for
// pinned CPU memory, the device pool of cuda:N. Copies of a Storage share the memory;
// the last one to go returns it to its pool, which reuses it on the storage's stream at
// once and on other streams only after the work recorded with RecordStream has
// finished. A storage can also wrap memory that the pools do not own (FromExternal),
// whose deleter then runs instead.
//
// Views. Every Storage is a view of its memory: a Layout (layout.h) counted in elements
// of its dtype from the start of the memory. View operations (Slice, Transpose,
// Reshape, ...) return a Storage sharing the memory, keeping it alive, with the bounds
// checked when the view is made.
//
// Streams. Work on a CUDA storage (fills, copies, conversions) runs on the storage's
// stream (StorageOptions::stream; nullptr is the legacy default stream) and is
// asynchronous to the host, like PyTorch: the factories and Contiguous() return once
// the work is queued. Work that reads or writes host memory (To(Device::Cpu()),
// CopyToHost, a copy from pageable memory) returns once it has finished. When an
// operation reads a storage with another stream than the one it runs on, it first waits
// for the source's stream and records the use, so the source's memory is not reused too
// early.
//
// Errors are absl::Status: InvalidArgument naming the bad value (shape, dtype,
// alignment, mismatched copies), OutOfRange for views outside their memory or a CUDA
// device that does not exist, ResourceExhausted when a pool is out of memory,
// FailedPrecondition for CUDA devices in the CPU-only build. On error nothing is
// allocated or leaked.
//
// Thread safety: like std::shared_ptr. Distinct Storage objects (copies included) may be
// used from different threads; writing the same memory from several threads at once is
// the caller's business.
#ifndef GENESIS_STORAGE_STORAGE_H_
#define GENESIS_STORAGE_STORAGE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <source_location>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "genesis/core/device.h"
#include "genesis/core/dtype.h"
#include "genesis/core/status.h"
#include "genesis/storage/layout.h"

// The CUDA headers' own declaration: cudaStream_t is CUstream_st*.
struct CUstream_st;

namespace genesis::memory {
class CachingAllocator;
}

namespace genesis::storage {

// Default alignment of a storage's memory (F9).
inline constexpr size_t kDefaultCpuAlignment = 64;
inline constexpr size_t kDefaultCudaAlignment = 512;
// The largest alignment accepted.
inline constexpr size_t kMaxAlignment = size_t{1} << 30;

// How a new storage's memory is drawn.
struct StorageOptions {
  // CPU storages only: page-locked memory from the pinned pool (needs a GPU).
  bool pinned = false;
  // Alignment of the first byte of the memory: a power of two up to kMaxAlignment;
  // 0 means the default (kDefaultCpuAlignment or kDefaultCudaAlignment).
  size_t alignment = 0;
  // CUDA storages only: the stream (cudaStream_t) that orders the storage's work and
  // on which its memory is allocated and freed; nullptr is the legacy default stream.
  CUstream_st* stream = nullptr;
};

// Memory not drawn from the pools: FromExternal's deleter gets the base pointer.
using ExternalDeleter = std::function<void(void* base)>;

// What FromExternal is told about memory it wraps.
struct ExternalOptions {
  // Host memory that is page-locked.
  bool pinned = false;
  // Memory that must not be written (a file mapped for reading, say): copies into it
  // and fills fail with FailedPrecondition.
  bool read_only = false;
  // CUDA memory: the stream that orders the storage's work (nullptr: legacy default).
  CUstream_st* stream = nullptr;
};

namespace internal {
class Buffer;
}

class Storage {
 public:
  // An undefined storage (defined() is false): no memory, dtype float32 on the CPU, a
  // scalar layout; operations on it fail with FailedPrecondition.
  Storage() = default;

  // Wraps memory the pools do not own: `nbytes` bytes from `base` on `device`, viewed
  // through `layout` as elements of `dtype`. `deleter` (may be empty) runs once, with
  // `base`, when the last storage using the memory goes away; if this fails it runs
  // before returning, so the caller never keeps the duty. Fails if the view does not
  // fit in nbytes, base is null while the view reaches an element, or the dtype,
  // device (a CUDA device must exist) or options are invalid.
  static absl::StatusOr<Storage> FromExternal(
      void* base, size_t nbytes, const Layout& layout, DType dtype, Device device,
      ExternalDeleter deleter, const ExternalOptions& options = {},
      std::source_location where = std::source_location::current());

  bool defined() const { return buffer_ != nullptr; }

  // ---- Description.
  DType dtype() const { return dtype_; }
  Device device() const;
  // True for CPU storages in page-locked memory.
  bool is_pinned() const;
  // True for external memory wrapped read-only (ExternalOptions::read_only).
  bool is_read_only() const;
  const Layout& layout() const { return layout_; }
  absl::Span<const int64_t> shape() const { return layout_.shape(); }
  absl::Span<const int64_t> strides() const { return layout_.strides(); }
  int64_t offset() const { return layout_.offset(); }
  int rank() const { return layout_.rank(); }
  int64_t numel() const { return layout_.numel(); }
  size_t itemsize() const { return ItemSize(dtype_); }
  // Bytes the view's elements take (numel() * itemsize()).
  size_t nbytes() const { return static_cast<size_t>(numel()) * itemsize(); }
  // Bytes of the memory under the view (what was allocated, at least what the view
  // reaches); 0 for an undefined storage.
  size_t size_bytes() const;
  // The view's first element (base_ptr() + offset() * itemsize()); nullptr when
  // undefined. A device pointer for CUDA storages.
  void* data_ptr() const;
  // Element 0 of the memory.
  void* base_ptr() const;
  // The alignment the memory was asked to have (its real alignment may be larger).
  size_t alignment() const;
  // The stream ordering the storage's work (nullptr: the legacy default stream).
  CUstream_st* stream() const;
  // How many Storage objects share this memory (views included).
  long use_count() const { return buffer_.use_count(); }
  // A handle that keeps this storage's memory alive, and nothing else, while work that
  // runs after the storage may be gone still uses it; null for an undefined storage.
  // No allocation: it shares the storages' own count.
  std::shared_ptr<const void> KeepAlive() const { return buffer_; }
  // True if both share one memory.
  bool SharesMemoryWith(const Storage& other) const {
    return buffer_ != nullptr && buffer_ == other.buffer_;
  }
  // The pool the memory came from; nullptr for external memory.
  memory::CachingAllocator* pool() const;
  // The pool's block holding the memory (base_ptr(), or before it when the alignment
  // asked exceeded the pool's); nullptr for external memory.
  const void* pool_block() const;
  // Where the memory was made: the file:line of the factory's caller; for a storage
  // made by To, Clone or Contiguous, that of the storage it copies.
  std::source_location where() const;
  // "float32[2, 3] cuda:0 (strides [3, 1] offset 0)".
  std::string ToString() const;

  // ---- Views: zero-copy, sharing (and keeping alive) this storage's memory.
  // The same memory through `layout`; OutOfRange if it reaches outside the memory.
  absl::StatusOr<Storage> View(const Layout& layout) const;
  // As in layout.h.
  absl::StatusOr<Storage> Slice(int dim, int64_t start, int64_t stop,
                                int64_t step = 1) const;
  absl::StatusOr<Storage> Select(int dim, int64_t index) const;
  absl::StatusOr<Storage> Transpose(int dim0, int dim1) const;
  absl::StatusOr<Storage> Permute(absl::Span<const int> dims) const;
  absl::StatusOr<Storage> Reshape(absl::Span<const int64_t> shape) const;
  absl::StatusOr<Storage> Expand(absl::Span<const int64_t> shape) const;
  absl::StatusOr<Storage> Unsqueeze(int dim) const;
  absl::StatusOr<Storage> Squeeze(int dim) const;
  // True if the view's elements are consecutive, in row-major order.
  bool is_contiguous() const { return layout_.is_contiguous(); }

  // ---- Copies.
  // This storage if it is contiguous; otherwise a new contiguous storage on the same
  // device (same options) with the view's elements (a CUDA kernel on a GPU).
  absl::StatusOr<Storage> Contiguous() const;
  // A new contiguous storage on `device` with the view's elements; `options` as for
  // Empty. Always a copy, even to the same device.
  absl::StatusOr<Storage> To(Device device, const StorageOptions& options = {}) const;
  // A new contiguous storage on the same device with the elements converted to `dtype`
  // (convert_rules.h; a CUDA kernel on a GPU, with the same results as on the CPU).
  absl::StatusOr<Storage> To(DType dtype) const;
  // A contiguous copy on the same device, with the same options.
  absl::StatusOr<Storage> Clone() const;
  // Copies `src`'s elements into this view, element by element (PyTorch's copy_):
  // same shape and dtype required (InvalidArgument naming both); any pair of devices.
  // This view must not broadcast (a stride-0 dim of size > 1) and must not overlap
  // `src` in memory (InvalidArgument); FailedPrecondition if it is read-only. Returns
  // once the copy is queued on this storage's stream (once it has finished if either
  // side is on the CPU).
  absl::Status CopyFrom(const Storage& src);
  // Like CopyFrom, converting from src's dtype to this one's (same shape required).
  absl::Status ConvertFrom(const Storage& src);
  // OK if CopyFrom(src) (ConvertFrom, with `convert`) would be accepted: the checks
  // above, without copying.
  absl::Status CheckCopyFrom(const Storage& src, bool convert = false) const;
  // Fills the view with `value` converted to the dtype (convert_rules.h). Fails like
  // CopyFrom for a broadcasting or read-only view.
  absl::Status Fill(double value);
  // Copies the view's elements, in row-major order, to host memory at `dst`, which must
  // hold exactly nbytes() bytes (InvalidArgument otherwise), and returns when done.
  absl::Status CopyToHost(void* dst, size_t dst_bytes) const;
  // The elements as a vector; InvalidArgument if T is not the dtype's C++ type.
  template <ElementType T>
  absl::StatusOr<std::vector<T>> ToVector() const;

  // Says that work on `stream` (of this storage's device) uses the memory, so it is
  // reused elsewhere only after that work has finished. A no-op for CPU storages,
  // external memory and the storage's own stream.
  absl::Status RecordStream(CUstream_st* stream) const;
  // Waits for the work queued on the storage's stream (a no-op on the CPU).
  absl::Status Synchronize() const;

 private:
  friend absl::StatusOr<Storage> Empty(absl::Span<const int64_t>, DType, Device,
                                       const StorageOptions&, std::source_location);
  Storage(std::shared_ptr<internal::Buffer> buffer, const Layout& layout, DType dtype)
      : buffer_(std::move(buffer)), layout_(layout), dtype_(dtype) {}
  absl::Status CheckDefined(std::string_view what) const;
  // Defined, not read-only, not broadcasting.
  absl::Status CheckWritable(std::string_view what) const;
  absl::StatusOr<Storage> WithLayout(absl::StatusOr<Layout> layout) const;
  absl::Status CopyOrConvert(const Storage& src, bool convert);

  std::shared_ptr<internal::Buffer> buffer_;
  Layout layout_;
  DType dtype_ = DType::kFloat32;
};

// The bytes a contiguous `shape` of `dtype` takes. InvalidArgument for a negative or
// overflowing shape (naming it), an unknown dtype, or more than 2^62 bytes.
absl::StatusOr<size_t> ContiguousBytes(absl::Span<const int64_t> shape, DType dtype);

// The most threads that the copies and conversions of CPU storages (CopyFrom,
// ConvertFrom, Contiguous, Clone, To between CPU storages or dtypes, CopyToHost) may
// use, the calling thread among them, for the whole process: 1, the default, copies on
// the calling thread alone; 0 (kAllCores) allows one per hardware thread. Copies and
// conversions of 2 MiB and more are shared among them (strided_copy.h, convert.h).
// InvalidArgument for a negative count, nothing changed.
absl::Status SetHostCopyThreads(int threads);
// What SetHostCopyThreads set last (1 if never).
int HostCopyThreads();

// ---- Factories (F4). Each returns a contiguous storage of `shape` on `device`, its
// memory drawn from the device's pool with `options`. Errors: InvalidArgument for a
// negative or overflowing shape (naming it), an invalid dtype, a bad alignment, pinned
// or a stream on the wrong kind of device; OutOfRange for a CUDA device that does not
// exist; ResourceExhausted when out of memory; FailedPrecondition for CUDA devices in
// the CPU-only build.

// Uninitialised contents.
absl::StatusOr<Storage> Empty(absl::Span<const int64_t> shape, DType dtype, Device device,
                              const StorageOptions& options = {},
                              std::source_location where = std::source_location::current());
// Every element `value` converted to dtype (on a GPU, a fill kernel).
absl::StatusOr<Storage> Full(absl::Span<const int64_t> shape, double value, DType dtype,
                             Device device, const StorageOptions& options = {},
                             std::source_location where = std::source_location::current());
absl::StatusOr<Storage> Zeros(absl::Span<const int64_t> shape, DType dtype, Device device,
                              const StorageOptions& options = {},
                              std::source_location where = std::source_location::current());
absl::StatusOr<Storage> Ones(absl::Span<const int64_t> shape, DType dtype, Device device,
                             const StorageOptions& options = {},
                             std::source_location where = std::source_location::current());
// A 1-D storage of start, start + step, ... up to but excluding `stop`, like
// numpy.arange: ceil((stop - start) / step) elements, element i being
// start + i * step computed in double and converted to dtype. InvalidArgument for a
// step of 0, a non-finite argument, or more than 2^48 elements.
absl::StatusOr<Storage> Arange(double start, double stop, double step, DType dtype,
                               Device device, const StorageOptions& options = {},
                               std::source_location where = std::source_location::current());
// A storage holding a copy of the row-major elements at `host_data` (host memory, of
// dtype `dtype`, numel(shape) elements). The copy has finished when this returns.
absl::StatusOr<Storage> CreateStorage(const void* host_data, absl::Span<const int64_t> shape,
                                      DType dtype, Device device,
                                      const StorageOptions& options = {},
                                      std::source_location where =
                                          std::source_location::current());
// The same from typed values; shape defaults to {values.size()}. InvalidArgument if the
// shape's numel differs from values.size().
template <ElementType T>
absl::StatusOr<Storage> CreateStorage(
    absl::Span<const T> values, Device device, std::vector<int64_t> shape = {},
    const StorageOptions& options = {},
    std::source_location where = std::source_location::current());

// ---- Implementation of the templates.

namespace internal {
absl::Status CheckElementType(DType dtype, DType requested);
absl::Status CheckValueCount(absl::Span<const int64_t> shape, size_t count);
}  // namespace internal

template <ElementType T>
absl::StatusOr<std::vector<T>> Storage::ToVector() const {
  GENESIS_RETURN_IF_ERROR(internal::CheckElementType(dtype_, DTypeOf<T>()));
  std::vector<T> values(static_cast<size_t>(numel()));
  GENESIS_RETURN_IF_ERROR(CopyToHost(values.data(), values.size() * sizeof(T)));
  return values;
}

template <ElementType T>
absl::StatusOr<Storage> CreateStorage(absl::Span<const T> values, Device device,
                                      std::vector<int64_t> shape,
                                      const StorageOptions& options,
                                      std::source_location where) {
  if (shape.empty()) shape.push_back(static_cast<int64_t>(values.size()));
  GENESIS_RETURN_IF_ERROR(internal::CheckValueCount(shape, values.size()));
  return CreateStorage(values.data(), shape, DTypeOf<T>(), device, options, where);
}

}  // namespace genesis::storage

#endif  // GENESIS_STORAGE_STORAGE_H_
