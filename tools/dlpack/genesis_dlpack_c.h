/* A small C ABI over genesis storages and DLPack, for loading from Python with ctypes
 * (tools/dlpack/torch_roundtrip.py) or from any C caller.
 *
 * Functions return 0 on success and -1 on failure; genesis_last_error() then says why
 * (for the calling thread). A genesis_storage is an opaque reference to a storage view;
 * free each with genesis_storage_free. DLManagedTensors handed out belong to the
 * receiver, which calls their deleter; those handed in belong to genesis from then on,
 * also when the call fails. */
#ifndef GENESIS_TOOLS_DLPACK_GENESIS_DLPACK_C_H_
#define GENESIS_TOOLS_DLPACK_GENESIS_DLPACK_C_H_

#include <stdint.h>

#include "dlpack/dlpack.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct genesis_storage genesis_storage;

/* The last error of this thread ("" if none). */
const char* genesis_last_error(void);

/* A new 1-D storage start, start + step, ... (< stop) of `dtype` ("float32", "bfloat16",
 * ...) on `device` ("cpu", "cuda:0"), finished on its stream before return. */
int genesis_arange(const char* device, const char* dtype, double start, double stop,
                   double step, genesis_storage** out);
/* Takes ownership of `tensor` and wraps it, zero-copy. */
int genesis_from_dlpack(DLManagedTensor* tensor, genesis_storage** out);
/* A new DLManagedTensor of the storage's view, sharing its memory. */
int genesis_to_dlpack(const genesis_storage* storage, DLManagedTensor** out);
/* The view's first element, its element count, and a description (valid until the next
 * call of genesis_describe on this thread). */
void* genesis_data_ptr(const genesis_storage* storage);
int64_t genesis_numel(const genesis_storage* storage);
const char* genesis_describe(const genesis_storage* storage);
/* The view's elements in row-major order, converted to float64 (a genesis conversion,
 * on the storage's device), into `out` of `count` == numel doubles. */
int genesis_to_float64(const genesis_storage* storage, double* out, int64_t count);
/* Writes `value` into every element of the view (in place: other views see it) and
 * waits for it. */
int genesis_fill(genesis_storage* storage, double value);
void genesis_storage_free(genesis_storage* storage);

#ifdef __cplusplus
}
#endif

#endif  /* GENESIS_TOOLS_DLPACK_GENESIS_DLPACK_C_H_ */
