// Test helpers for code that needs CUDA devices: skip a test, with the reason, where the
// devices it needs are not there (no GPU, no driver, the CPU-only build, or too few
// GPUs), so that one test binary passes on every machine and in both builds.
//
//   TEST(StreamTest, Synchronizes) {
//     GENESIS_SKIP_WITHOUT_GPU();
//     ...
//   }
//   TEST(PeerTest, Copies) {
//     GENESIS_SKIP_IF_FEWER_DEVICES(2);
//     ...
//   }
//
// The macros return from the test body (GTEST_SKIP), so use them at its top level (or in
// SetUp). Testonly: target //genesis/cuda:test_util.

#ifndef GENESIS_CUDA_TEST_UTIL_H_
#define GENESIS_CUDA_TEST_UTIL_H_

#include <optional>
#include <string>

#include "gtest/gtest.h"

namespace genesis::cuda {

// Why a test that needs `min_devices` CUDA devices cannot run here, or nullopt if it
// can: "no CUDA device: <NoDeviceReason()>" when there is none, "needs 2 CUDA devices,
// 1 visible" when there are too few.
std::optional<std::string> SkipReasonForDevices(int min_devices);

}  // namespace genesis::cuda

// Skips the current test (GTEST_SKIP) unless at least `min_devices` CUDA devices are
// visible; the skip message says why. More text may be streamed after it with <<.
#define GENESIS_SKIP_IF_FEWER_DEVICES(min_devices)                                  \
  if (const std::optional<std::string> genesis_skip_reason_ =                       \
          ::genesis::cuda::SkipReasonForDevices(min_devices);                       \
      !genesis_skip_reason_.has_value()) {                                          \
  } else                                                                            \
    GTEST_SKIP() << *genesis_skip_reason_

// Skips the current test unless at least one CUDA device is visible.
#define GENESIS_SKIP_WITHOUT_GPU() GENESIS_SKIP_IF_FEWER_DEVICES(1)

#endif  // GENESIS_CUDA_TEST_UTIL_H_
