// inspect_storage (F10): everything there is to know about one storage, for debugging
// and for logs: its view, its memory, and the pool the memory came from.
//
//   std::cout << InspectStorage(weights).ToString();
#ifndef GENESIS_STORAGE_INSPECT_H_
#define GENESIS_STORAGE_INSPECT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "genesis/core/device.h"
#include "genesis/core/dtype.h"
#include "genesis/storage/storage.h"

namespace genesis::storage {

struct StorageInfo {
  bool defined = false;
  // The view.
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // In elements.
  int64_t offset = 0;            // In elements.
  DType dtype = DType::kFloat32;
  int64_t numel = 0;
  size_t nbytes = 0;  // The view's elements.
  bool contiguous = true;
  // The memory.
  Device device;
  bool pinned = false;
  bool read_only = false;
  const void* data_ptr = nullptr;
  const void* base_ptr = nullptr;
  size_t size_bytes = 0;
  size_t alignment = 0;
  long use_count = 0;  // Storage objects sharing the memory.
  std::string where;   // "file:line" of the call that made the memory.
  // The pool (from_pool false for external memory; the rest is then empty).
  bool from_pool = false;
  std::string pool_backend;      // e.g. "cuda:0 device (cudaMalloc, cuMemMap)".
  size_t block_bytes = 0;        // The pool block holding the memory, after rounding.
  bool expandable_segments = false;
  int64_t pool_allocated_bytes = 0;  // The pool's totals at the time of the call.
  int64_t pool_reserved_bytes = 0;

  // One "key: value" line per field.
  std::string ToString() const;
};

// Describes `storage` (an undefined storage gives defined == false and nothing else).
// Reads the pool's statistics, so it costs a little; never fails.
StorageInfo InspectStorage(const Storage& storage);

}  // namespace genesis::storage

#endif  // GENESIS_STORAGE_INSPECT_H_
