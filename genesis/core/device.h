// Names the device (host CPU or a CUDA GPU) that memory or a computation
// lives on.
//
// Device is a small, trivially copyable value type; pass it by value.
//
//   genesis::Device d = genesis::Device::Cuda(1);
//   d.ToString();                                // "cuda:1"
//   GENESIS_ASSIGN_OR_RETURN(genesis::Device parsed,
//                            genesis::Device::Parse(flag_value));
//
// Device only describes a device; it does not know what hardware exists.
// Device::Parse("cuda:7") succeeds on a machine with one GPU (or none):
// checking that a CUDA device index exists is the job of genesis/cuda, which
// can query the driver. Keeping that out of core lets core build and run
// without CUDA.
//
// Devices hash with absl::Hash and print with operator<< (and, with abseil
// versions that support it, absl::StrCat / absl::StrFormat("%v")).

#ifndef GENESIS_CORE_DEVICE_H_
#define GENESIS_CORE_DEVICE_H_

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <utility>

#include "absl/base/macros.h"
#include "absl/status/statusor.h"

namespace genesis {

enum class DeviceType : uint8_t {
  kCpu,
  kCuda,
};

class Device {
 public:
  // Largest CUDA index Parse() accepts. Far above any real machine; it exists
  // so that a typo'd index fails loudly instead of wrapping around.
  static constexpr int kMaxIndex = 1'000'000;

  // The CPU.
  constexpr Device() = default;

  // Requires: index == 0 for kCpu, 0 <= index <= kMaxIndex for kCuda. This
  // is checked only in debug builds (ABSL_ASSERT); use Parse() for untrusted
  // input.
  constexpr Device(DeviceType type, int index) : type_(type), index_(index) {
    ABSL_ASSERT(
        (type == DeviceType::kCpu && index == 0) ||
        (type == DeviceType::kCuda && index >= 0 && index <= kMaxIndex));
  }

  static constexpr Device Cpu() { return Device(); }
  // Same precondition on `index` as the constructor.
  static constexpr Device Cuda(int index = 0) {
    return Device(DeviceType::kCuda, index);
  }

  // Parses the forms ToString() produces plus two short forms:
  //   "cpu", "cpu:0"           -> Cpu()
  //   "cuda"                   -> Cuda(0)
  //   "cuda:N"                 -> Cuda(N)
  // N is plain decimal digits with no sign, whitespace or leading zeros
  // (except "0" itself), at most kMaxIndex. Matching is case-sensitive.
  // Anything else is an InvalidArgument error whose message quotes the whole
  // input. Does not check that the device exists (see the file comment).
  static absl::StatusOr<Device> Parse(std::string_view text);

  constexpr DeviceType type() const { return type_; }
  // Always 0 for the CPU.
  constexpr int index() const { return index_; }
  constexpr bool is_cpu() const { return type_ == DeviceType::kCpu; }
  constexpr bool is_cuda() const { return type_ == DeviceType::kCuda; }

  // "cpu" or "cuda:N". Parse(d.ToString()) == d for every valid Device.
  std::string ToString() const;

  friend constexpr bool operator==(const Device&, const Device&) = default;

  template <typename H>
  friend H AbslHashValue(H h, const Device& device) {
    return H::combine(std::move(h), device.type_, device.index_);
  }

  template <typename Sink>
  friend void AbslStringify(Sink& sink, const Device& device) {
    sink.Append(device.ToString());
  }

 private:
  DeviceType type_ = DeviceType::kCpu;
  int index_ = 0;
};

// Writes device.ToString().
std::ostream& operator<<(std::ostream& os, const Device& device);

}  // namespace genesis

#endif  // GENESIS_CORE_DEVICE_H_
