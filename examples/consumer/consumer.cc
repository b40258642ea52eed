// A program outside the genesis workspace that uses it: parses devices and dtypes,
// converts through float16, and runs genesis's CUDA kernel check on every visible GPU.
// Exits non-zero if anything that should work does not.
#include <cstdio>

#include "genesis/core/device.h"
#include "genesis/core/dtype.h"
#include "genesis/core/half.h"
#include "genesis/cuda/device_query.h"
#include "genesis/cuda/kernel_check.h"

int main() {
  auto device = genesis::Device::Parse("cuda:1");
  auto dtype = genesis::ParseDType("bfloat16");
  if (!device.ok() || !dtype.ok() || genesis::Device::Parse("gpu").ok()) {
    std::fprintf(stderr, "device/dtype parsing is broken\n");
    return 1;
  }
  const float x = genesis::HalfBitsToFloat(genesis::FloatToHalfBits(0.1f));
  std::printf("parsed %s and %s; 0.1 as float16 is %.8f\n", device->ToString().c_str(),
              std::string(genesis::DTypeName(*dtype)).c_str(), x);
  if (x != 0.0999755859375f) return 1;

  const int count = genesis::cuda::DeviceCount();
  std::printf("CUDA kernels compiled in: %s; CUDA devices: %d\n",
              genesis::cuda::KernelsCompiledIn() ? "yes" : "no", count);
  for (int i = 0; i < count; ++i) {
    const auto status = genesis::cuda::CheckKernelLaunch(i);
    std::printf("cuda:%d kernel check: %s\n", i, status.ok() ? "ok" : status.ToString().c_str());
    if (!status.ok()) return 1;
  }
  return 0;
}
