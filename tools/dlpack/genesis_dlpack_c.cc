#include "tools/dlpack/genesis_dlpack_c.h"

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "genesis/core/device.h"
#include "genesis/core/dtype.h"
#include "genesis/storage/dlpack.h"
#include "genesis/storage/storage.h"

struct genesis_storage {
  genesis::storage::Storage storage;
};

namespace {

thread_local std::string last_error;
thread_local std::string last_description;

int Fail(const absl::Status& status) {
  last_error = status.ToString();
  return -1;
}

}  // namespace

extern "C" {

const char* genesis_last_error(void) { return last_error.c_str(); }

int genesis_arange(const char* device, const char* dtype, double start, double stop,
                   double step, genesis_storage** out) {
  const absl::StatusOr<genesis::Device> parsed_device = genesis::Device::Parse(device);
  if (!parsed_device.ok()) return Fail(parsed_device.status());
  const absl::StatusOr<genesis::DType> parsed_dtype = genesis::ParseDType(dtype);
  if (!parsed_dtype.ok()) return Fail(parsed_dtype.status());
  absl::StatusOr<genesis::storage::Storage> storage =
      genesis::storage::Arange(start, stop, step, *parsed_dtype, *parsed_device);
  if (!storage.ok()) return Fail(storage.status());
  if (absl::Status s = storage->Synchronize(); !s.ok()) return Fail(s);
  *out = new genesis_storage{*std::move(storage)};
  return 0;
}

int genesis_from_dlpack(DLManagedTensor* tensor, genesis_storage** out) {
  absl::StatusOr<genesis::storage::Storage> storage = genesis::storage::FromDLPack(tensor);
  if (!storage.ok()) return Fail(storage.status());
  *out = new genesis_storage{*std::move(storage)};
  return 0;
}

int genesis_to_dlpack(const genesis_storage* storage, DLManagedTensor** out) {
  absl::StatusOr<DLManagedTensor*> tensor = genesis::storage::ToDLPack(storage->storage);
  if (!tensor.ok()) return Fail(tensor.status());
  *out = *tensor;
  return 0;
}

void* genesis_data_ptr(const genesis_storage* storage) { return storage->storage.data_ptr(); }

int64_t genesis_numel(const genesis_storage* storage) { return storage->storage.numel(); }

const char* genesis_describe(const genesis_storage* storage) {
  last_description = storage->storage.ToString();
  return last_description.c_str();
}

int genesis_to_float64(const genesis_storage* storage, double* out, int64_t count) {
  absl::StatusOr<genesis::storage::Storage> doubles =
      storage->storage.To(genesis::DType::kFloat64);
  if (!doubles.ok()) return Fail(doubles.status());
  if (absl::Status s = doubles->CopyToHost(out, static_cast<size_t>(count) * sizeof(double));
      !s.ok()) {
    return Fail(s);
  }
  return 0;
}

int genesis_fill(genesis_storage* storage, double value) {
  if (absl::Status s = storage->storage.Fill(value); !s.ok()) return Fail(s);
  if (absl::Status s = storage->storage.Synchronize(); !s.ok()) return Fail(s);
  return 0;
}

void genesis_storage_free(genesis_storage* storage) { delete storage; }

}  // extern "C"
