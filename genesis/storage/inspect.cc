#include "genesis/storage/inspect.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "genesis/core/absl_compat.h"
#include "genesis/memory/caching_allocator.h"

namespace genesis::storage {
namespace {

const char* Bool(bool b) { return b ? "true" : "false"; }

}  // namespace

StorageInfo InspectStorage(const Storage& storage) {
  StorageInfo info;
  if (!storage.defined()) return info;
  info.defined = true;
  info.shape.assign(storage.shape().begin(), storage.shape().end());
  info.strides.assign(storage.strides().begin(), storage.strides().end());
  info.offset = storage.offset();
  info.dtype = storage.dtype();
  info.numel = storage.numel();
  info.nbytes = storage.nbytes();
  info.contiguous = storage.is_contiguous();
  info.device = storage.device();
  info.pinned = storage.is_pinned();
  info.read_only = storage.is_read_only();
  info.data_ptr = storage.data_ptr();
  info.base_ptr = storage.base_ptr();
  info.size_bytes = storage.size_bytes();
  info.alignment = storage.alignment();
  info.use_count = storage.use_count();
  const std::source_location where = storage.where();
  info.where = absl::StrCat(where.file_name(), ":", where.line());
  if (const memory::CachingAllocator* pool = storage.pool(); pool != nullptr) {
    info.from_pool = true;
    info.pool_backend = std::string(pool->backend().name());
    info.block_bytes = pool->AllocationSize(storage.pool_block());
    info.expandable_segments = pool->expandable_segments();
    const memory::MemoryStats stats = pool->Stats();
    info.pool_allocated_bytes = stats.all.allocated_bytes.current;
    info.pool_reserved_bytes = stats.all.reserved_bytes.current;
  }
  return info;
}

std::string StorageInfo::ToString() const {
  if (!defined) return "storage: undefined\n";
  std::string out = absl::StrFormat(
      "shape: [%s]\nstrides: [%s]\noffset: %d\ndtype: %s\nnumel: %d\nnbytes: %d\n"
      "contiguous: %s\ndevice: %s\npinned: %s\nread_only: %s\ndata_ptr: %p\nbase_ptr: %p\n"
      "size_bytes: %d\nalignment: %d\nuse_count: %d\nmade_at: %s\n",
      absl::StrJoin(shape, ", "), absl::StrJoin(strides, ", "), offset,
      ToAbsl(DTypeName(dtype)), numel, nbytes, Bool(contiguous), device.ToString(),
      Bool(pinned), Bool(read_only), data_ptr, base_ptr, size_bytes, alignment, use_count, where);
  if (!from_pool) return absl::StrCat(out, "pool: none (external memory)\n");
  return absl::StrCat(
      out,
      absl::StrFormat("pool: %s\nblock_bytes: %d\nexpandable_segments: %s\n"
                      "pool_allocated_bytes: %d\npool_reserved_bytes: %d\n",
                      pool_backend, block_bytes, Bool(expandable_segments), pool_allocated_bytes,
                      pool_reserved_bytes));
}

}  // namespace genesis::storage
