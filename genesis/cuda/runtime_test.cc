// Tests of genesis/cuda that run on every machine and in both builds (with CUDA and
// CPU-only), with or without GPUs: device counting and validation, version formatting,
// argument checks, and what the CPU-only build reports.

#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "genesis/core/device.h"
#include "genesis/cuda/device_guard.h"
#include "genesis/cuda/device_query.h"
#include "genesis/cuda/event.h"
#include "genesis/cuda/stream.h"
#include "genesis/cuda/test_util.h"
#include "gtest/gtest.h"

namespace genesis::cuda {
namespace {

// The code a request about a non-existent CUDA device gets: OutOfRange, or
// FailedPrecondition in the CPU-only build (where no CUDA device can exist).
absl::StatusCode MissingDeviceCode() {
  return BuiltWithCuda() ? absl::StatusCode::kOutOfRange
                         : absl::StatusCode::kFailedPrecondition;
}

TEST(DeviceCountTest, IsNonNegativeAndStable) {
  const int count = DeviceCount();
  EXPECT_GE(count, 0);
  EXPECT_EQ(DeviceCount(), count);
  // A reason is given exactly when there is no device.
  EXPECT_EQ(NoDeviceReason().empty(), count > 0) << NoDeviceReason();
  std::cout << "DeviceCount() = " << count;
  if (count == 0) std::cout << " (" << NoDeviceReason() << ")";
  std::cout << "\n";
}

TEST(DeviceCountTest, IsThreadSafe) {
  std::vector<int> counts(8, -1);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&counts, i] {
      counts[i] = DeviceCount();
      (void)NoDeviceReason();
      (void)GetVersions();
    });
  }
  for (std::thread& t : threads) t.join();
  for (int c : counts) EXPECT_EQ(c, DeviceCount());
}

TEST(CheckDeviceExistsTest, CpuAlwaysExists) {
  EXPECT_TRUE(CheckDeviceExists(Device::Cpu()).ok());
}

TEST(CheckDeviceExistsTest, MissingCudaDeviceNamesIt) {
  const absl::Status status = CheckDeviceExists(Device::Cuda(99));
  EXPECT_EQ(status.code(), MissingDeviceCode()) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "cuda:99")) << status;
}

TEST(CheckDeviceExistsTest, FirstIndexPastTheEndIsMissing) {
  const absl::Status status = CheckDeviceIndex(DeviceCount());
  EXPECT_EQ(status.code(), MissingDeviceCode()) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), absl::StrCat("cuda:", DeviceCount())))
      << status;
}

TEST(CheckDeviceExistsTest, NegativeIndexIsMissing) {
  const absl::Status status = CheckDeviceIndex(-1);
  EXPECT_EQ(status.code(), MissingDeviceCode()) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "cuda:-1")) << status;
}

TEST(CheckDeviceExistsTest, MessageSaysHowManyDevicesAreVisible) {
  if (!BuiltWithCuda()) GTEST_SKIP() << "CPU-only build: see CpuOnlyBuildTest";
  const absl::Status status = CheckDeviceIndex(99);
  if (DeviceCount() == 0) {
    EXPECT_TRUE(absl::StrContains(status.message(),
                                  "no CUDA device is visible (reason: " + NoDeviceReason()))
        << status;
  } else {
    EXPECT_TRUE(absl::StrContains(status.message(),
                                  absl::StrCat(DeviceCount(), " CUDA device")))
        << status;
  }
}

TEST(ResolveDeviceTest, Cpu) {
  const absl::StatusOr<Device> device = ResolveDevice("cpu");
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_EQ(*device, Device::Cpu());
}

TEST(ResolveDeviceTest, PropagatesParseError) {
  const absl::StatusOr<Device> device = ResolveDevice("gpu");
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status(), Device::Parse("gpu").status());
}

TEST(ResolveDeviceTest, MissingCudaDevice) {
  const absl::StatusOr<Device> device = ResolveDevice("cuda:99");
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), MissingDeviceCode()) << device.status();
  EXPECT_TRUE(absl::StrContains(device.status().message(), "cuda:99")) << device.status();
}

TEST(ResolveDeviceTest, ExistingCudaDevice) {
  GENESIS_SKIP_WITHOUT_GPU();
  const absl::StatusOr<Device> device = ResolveDevice("cuda:0");
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_EQ(*device, Device::Cuda(0));
}

TEST(FormatTest, CudaVersion) {
  EXPECT_EQ(FormatCudaVersion(13000), "13.0");
  EXPECT_EQ(FormatCudaVersion(12080), "12.8");
  EXPECT_EQ(FormatCudaVersion(11020), "11.2");
  EXPECT_EQ(FormatCudaVersion(0), "none");
}

TEST(FormatTest, NcclVersion) {
  EXPECT_EQ(FormatNcclVersion(22809), "2.28.9");
  EXPECT_EQ(FormatNcclVersion(21805), "2.18.5");
  EXPECT_EQ(FormatNcclVersion(2708), "2.7.8");
  EXPECT_EQ(FormatNcclVersion(0), "none");
}

TEST(FormatTest, Versions) {
  EXPECT_EQ(FormatVersions(Versions{13000, 13000, 22809, "", ""}),
            "CUDA runtime 13.0, driver 13.0, NCCL 2.28.9");
  EXPECT_EQ(FormatVersions(Versions{13000, 0, 0, "libnccl.so.2: not found", ""}),
            "CUDA runtime 13.0, driver none, NCCL none (libnccl.so.2: not found)");
  EXPECT_EQ(FormatVersions(Versions{13000, 13000, 22809, "", "/opt/nccl/lib/libnccl.so.2"}),
            "CUDA runtime 13.0, driver 13.0, NCCL 2.28.9 (/opt/nccl/lib/libnccl.so.2)");
}

TEST(VersionsTest, AreConsistent) {
  const Versions versions = GetVersions();
  std::cout << FormatVersions(versions) << "\n";
  EXPECT_EQ(versions.runtime > 0, BuiltWithCuda());
  EXPECT_GE(versions.driver, 0);
  EXPECT_EQ(versions.nccl > 0, versions.nccl_error.empty()) << versions.nccl_error;
  if (DeviceCount() > 0) {
    EXPECT_GT(versions.driver, 0);
  }
}

TEST(CreateTest, MissingDeviceFails) {
  for (int device : {9999, -1}) {
    const std::string name = absl::StrCat("cuda:", device);
    const absl::StatusOr<Stream> stream = Stream::Create(device);
    EXPECT_EQ(stream.status().code(), MissingDeviceCode()) << stream.status();
    EXPECT_TRUE(absl::StrContains(stream.status().message(), name)) << stream.status();

    const absl::StatusOr<Event> event = Event::Create(device, /*timing=*/true);
    EXPECT_EQ(event.status().code(), MissingDeviceCode()) << event.status();
    EXPECT_TRUE(absl::StrContains(event.status().message(), name)) << event.status();

    const absl::StatusOr<DeviceGuard> guard = DeviceGuard::Create(device);
    EXPECT_EQ(guard.status().code(), MissingDeviceCode()) << guard.status();
    EXPECT_TRUE(absl::StrContains(guard.status().message(), name)) << guard.status();

    const absl::StatusOr<DeviceProperties> props = GetDeviceProperties(device);
    EXPECT_EQ(props.status().code(), MissingDeviceCode()) << props.status();
    EXPECT_TRUE(absl::StrContains(props.status().message(), name)) << props.status();

    const absl::StatusOr<MemoryInfo> memory = GetMemoryInfo(device);
    EXPECT_EQ(memory.status().code(), MissingDeviceCode()) << memory.status();
    EXPECT_TRUE(absl::StrContains(memory.status().message(), name)) << memory.status();
  }
}

TEST(EmptyHandleTest, StreamAndEvent) {
  Stream stream;
  EXPECT_FALSE(stream.valid());
  EXPECT_EQ(stream.native(), nullptr);
  EXPECT_EQ(stream.device(), -1);
  EXPECT_EQ(stream.Synchronize().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(stream.Query().status().code(), absl::StatusCode::kFailedPrecondition);

  Event event;
  EXPECT_FALSE(event.valid());
  EXPECT_EQ(event.native(), nullptr);
  EXPECT_EQ(event.Record(stream).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(event.Synchronize().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(event.Query().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(stream.Wait(event).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Event::ElapsedMs(event, event).status().code(),
            absl::StatusCode::kFailedPrecondition);

  Stream moved = std::move(stream);
  EXPECT_FALSE(moved.valid());
  Event moved_event = std::move(event);
  EXPECT_FALSE(moved_event.valid());
}

TEST(SkipReasonTest, SaysWhy) {
  EXPECT_FALSE(SkipReasonForDevices(0).has_value());
  EXPECT_FALSE(SkipReasonForDevices(DeviceCount()).has_value());
  const std::optional<std::string> reason = SkipReasonForDevices(DeviceCount() + 1);
  ASSERT_TRUE(reason.has_value());
  if (DeviceCount() == 0) {
    EXPECT_EQ(*reason, "no CUDA device: " + NoDeviceReason());
  } else {
    EXPECT_TRUE(absl::StrContains(*reason, "CUDA devices")) << *reason;
  }
}

// What the CPU-only build promises; skipped (with the reason) in a build with CUDA.
TEST(CpuOnlyBuildTest, ReportsNoCudaSupport) {
  if (BuiltWithCuda()) GTEST_SKIP() << "this build has CUDA support";
  constexpr const char* kPrefix =
      "genesis was built without CUDA support (CPU-only build)";
  EXPECT_EQ(DeviceCount(), 0);
  EXPECT_TRUE(absl::StartsWith(NoDeviceReason(), kPrefix)) << NoDeviceReason();

  const absl::StatusOr<Stream> stream = Stream::Create(0);
  EXPECT_EQ(stream.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StartsWith(stream.status().message(), kPrefix)) << stream.status();
  EXPECT_EQ(Stream::HighestPriority(0).status().code(), absl::StatusCode::kFailedPrecondition);
  const absl::StatusOr<Event> event = Event::Create(0);
  EXPECT_EQ(event.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(DeviceGuard::Create(0).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CurrentDevice().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(GetDeviceProperties(0).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(GetMemoryInfo(0).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(PeerAccessMatrix().status().code(), absl::StatusCode::kFailedPrecondition);

  const absl::StatusOr<Device> device = ResolveDevice("cuda:0");
  EXPECT_EQ(device.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StartsWith(device.status().message(), kPrefix)) << device.status();
  EXPECT_TRUE(absl::StrContains(device.status().message(), "cuda:0")) << device.status();

  const Versions versions = GetVersions();
  EXPECT_EQ(versions.runtime, 0);
  EXPECT_EQ(versions.driver, 0);
  EXPECT_EQ(versions.nccl, 0);
  EXPECT_TRUE(absl::StartsWith(versions.nccl_error, kPrefix)) << versions.nccl_error;
}

// A build with CUDA on a machine without a usable GPU (no driver, or every device
// hidden): zero devices and clean errors; skipped elsewhere.
TEST(NoGpuTest, ReportsZeroDevicesCleanly) {
  if (!BuiltWithCuda()) GTEST_SKIP() << "CPU-only build: see CpuOnlyBuildTest";
  if (DeviceCount() > 0) GTEST_SKIP() << DeviceCount() << " CUDA device(s) visible";
  EXPECT_FALSE(NoDeviceReason().empty());
  const absl::Status status = CheckDeviceIndex(0);
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_TRUE(absl::StrContains(status.message(), "no CUDA device is visible (reason: "))
      << status;
  const absl::StatusOr<std::vector<std::vector<bool>>> matrix = PeerAccessMatrix();
  ASSERT_TRUE(matrix.ok()) << matrix.status();
  EXPECT_TRUE(matrix->empty());
  EXPECT_EQ(Stream::Create(0).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(Stream::HighestPriority(0).status().code(), absl::StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace genesis::cuda
