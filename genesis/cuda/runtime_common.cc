// The part of genesis/cuda that is the same with and without CUDA: formatting,
// validation and the moves of the RAII classes. Compiled in both builds; everything
// that calls CUDA is in the other .cc files (or runtime_nocuda.cc in the CPU-only
// build).

#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "genesis/core/device.h"
#include "genesis/core/status.h"
#include "genesis/cuda/device_guard.h"
#include "genesis/cuda/device_query.h"
#include "genesis/cuda/event.h"
#include "genesis/cuda/internal/common.h"
#include "genesis/cuda/stream.h"

namespace genesis::cuda {
namespace internal {

absl::Status NoCudaSupportError(std::string_view what) {
  return absl::FailedPreconditionError(
      absl::StrCat(ToAbsl(kBuiltWithoutCuda), "; cannot ", ToAbsl(what),
                   " (rebuild with a CUDA toolkit, e.g. --config=cuda)"));
}

absl::Status DeviceIndexStatus(int index, int count, std::string_view no_device_reason) {
  if (index >= 0 && index < count) return absl::OkStatus();
  std::string message = absl::StrCat("device 'cuda:", index, "' does not exist: ");
  if (count <= 0) {
    absl::StrAppend(&message, "no CUDA device is visible (reason: ",
                    ToAbsl(no_device_reason), ")");
  } else if (count == 1) {
    absl::StrAppend(&message, "1 CUDA device visible (cuda:0)", VisibleDevicesNote());
  } else {
    absl::StrAppend(&message, count, " CUDA devices visible (cuda:0 to cuda:", count - 1,
                    ")", VisibleDevicesNote());
  }
  return absl::OutOfRangeError(message);
}

absl::Status EmptyHandleError(std::string_view class_name, std::string_view what) {
  return absl::FailedPreconditionError(absl::StrCat(
      ToAbsl(what), " on an empty ", ToAbsl(class_name),
      " (default-constructed or moved-from)"));
}

std::string VisibleDevicesNote() {
  const char* value = std::getenv("CUDA_VISIBLE_DEVICES");
  if (value == nullptr) return "";
  return absl::StrCat("; CUDA_VISIBLE_DEVICES='", value, "'");
}

std::string FormatUuid(const char* bytes16) {
  std::string hex;
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) hex += '-';
    absl::StrAppendFormat(&hex, "%02x", static_cast<unsigned char>(bytes16[i]));
  }
  return absl::StrCat("GPU-", hex);
}

std::string FormatPciBusId(int domain, int bus, int device) {
  return absl::StrFormat("%04x:%02x:%02x.0", domain, bus, device);
}

}  // namespace internal

absl::Status CheckDeviceExists(const Device& device) {
  if (!device.is_cuda()) return absl::OkStatus();
  return CheckDeviceIndex(device.index());
}

absl::StatusOr<Device> ResolveDevice(std::string_view spec) {
  GENESIS_ASSIGN_OR_RETURN(Device device, Device::Parse(spec));
  GENESIS_RETURN_IF_ERROR(CheckDeviceExists(device));
  return device;
}

std::string FormatCudaVersion(int version) {
  if (version <= 0) return "none";
  return absl::StrCat(version / 1000, ".", (version % 1000) / 10);
}

std::string FormatNcclVersion(int version) {
  if (version <= 0) return "none";
  if (version >= 10000) {
    return absl::StrCat(version / 10000, ".", (version % 10000) / 100, ".", version % 100);
  }
  return absl::StrCat(version / 1000, ".", (version % 1000) / 100, ".", version % 100);
}

std::string FormatVersions(const Versions& versions) {
  std::string text = absl::StrCat("CUDA runtime ", FormatCudaVersion(versions.runtime),
                                  ", driver ", FormatCudaVersion(versions.driver),
                                  ", NCCL ", FormatNcclVersion(versions.nccl));
  if (versions.nccl <= 0 && !versions.nccl_error.empty()) {
    absl::StrAppend(&text, " (", versions.nccl_error, ")");
  } else if (!versions.nccl_library.empty()) {
    absl::StrAppend(&text, " (", versions.nccl_library, ")");
  }
  return text;
}

// Moves of the RAII classes; Restore()/Reset() are build-specific.

DeviceGuard::DeviceGuard(DeviceGuard&& other) noexcept
    : device_(other.device_),
      previous_(other.previous_),
      active_(std::exchange(other.active_, false)) {}

DeviceGuard& DeviceGuard::operator=(DeviceGuard&& other) noexcept {
  if (this != &other) {
    Restore();
    device_ = other.device_;
    previous_ = other.previous_;
    active_ = std::exchange(other.active_, false);
  }
  return *this;
}

DeviceGuard::~DeviceGuard() { Restore(); }

Stream::Stream(Stream&& other) noexcept
    : stream_(std::exchange(other.stream_, nullptr)),
      device_(std::exchange(other.device_, -1)),
      priority_(std::exchange(other.priority_, 0)),
      non_blocking_(std::exchange(other.non_blocking_, true)) {}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    Reset();
    stream_ = std::exchange(other.stream_, nullptr);
    device_ = std::exchange(other.device_, -1);
    priority_ = std::exchange(other.priority_, 0);
    non_blocking_ = std::exchange(other.non_blocking_, true);
  }
  return *this;
}

Stream::~Stream() { Reset(); }

Event::Event(Event&& other) noexcept
    : event_(std::exchange(other.event_, nullptr)),
      device_(std::exchange(other.device_, -1)),
      timing_(std::exchange(other.timing_, false)),
      recorded_(std::exchange(other.recorded_, false)) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    Reset();
    event_ = std::exchange(other.event_, nullptr);
    device_ = std::exchange(other.device_, -1);
    timing_ = std::exchange(other.timing_, false);
    recorded_ = std::exchange(other.recorded_, false);
  }
  return *this;
}

Event::~Event() { Reset(); }

}  // namespace genesis::cuda
