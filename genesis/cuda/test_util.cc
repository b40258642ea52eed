#include "genesis/cuda/test_util.h"

#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "genesis/cuda/device_query.h"

namespace genesis::cuda {

std::optional<std::string> SkipReasonForDevices(int min_devices) {
  const int count = DeviceCount();
  if (count >= min_devices) return std::nullopt;
  if (count == 0) return absl::StrCat("no CUDA device: ", NoDeviceReason());
  return absl::StrCat("needs ", min_devices, " CUDA devices, ", count, " visible");
}

}  // namespace genesis::cuda
