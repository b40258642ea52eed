#include "genesis/distributed/process_group_factory.h"

#include <optional>
#include <string>
#include <utility>

#include <unistd.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "genesis/core/status.h"
#include "genesis/distributed/gloo/gloo_communicator.h"
#include "genesis/distributed/nccl/nccl_communicator.h"

namespace genesis::distributed {
namespace {

absl::Status CheckWorld(int rank, int size) {
  if (size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("world size ", size, " is below 1"));
  }
  if (rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " is outside [0, ", size, ")"));
  }
  return absl::OkStatus();
}

GroupInfo Info(const std::string& backend, int rank, int size, Device device,
               const GroupOptions& options) {
  GroupInfo info;
  info.name = options.name;
  info.backend = backend;
  info.rank = rank;
  info.size = size;
  info.device = device;
  info.timeout = options.timeout;
  info.nccl_blocking = options.nccl_blocking;
  info.nccl_register_buffers = options.nccl_register_buffers;
  return info;
}

std::string ThisHost() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "127.0.0.1";
  return name;
}

// The value of switch `name` (0 or 1) if the environment sets it.
absl::StatusOr<std::optional<bool>> EnvSwitch(const EnvLookup& lookup, const char* name) {
  std::optional<std::string> value = lookup(name);
  if (!value.has_value()) return std::optional<bool>();
  if (*value != "0" && *value != "1") {
    return absl::InvalidArgumentError(
        absl::StrCat("environment variable ", name, "='", *value, "' is not 0 or 1"));
  }
  return std::optional<bool>(*value == "1");
}

// The environment's GENESIS_DISTRIBUTED_TIMEOUT, GENESIS_NCCL_BLOCKING and
// GENESIS_NCCL_REGISTER applied to `options`.
absl::StatusOr<GroupOptions> WithEnvironment(GroupOptions options, const EnvLookup& lookup) {
  if (std::optional<std::string> value = lookup("GENESIS_DISTRIBUTED_TIMEOUT")) {
    double seconds = 0;
    if (!absl::SimpleAtod(*value, &seconds) || !(seconds > 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "environment variable GENESIS_DISTRIBUTED_TIMEOUT='", *value,
          "' is not a positive number of seconds"));
    }
    options.timeout = absl::Seconds(seconds);
  }
  GENESIS_ASSIGN_OR_RETURN(std::optional<bool> blocking,
                           EnvSwitch(lookup, "GENESIS_NCCL_BLOCKING"));
  if (blocking.has_value()) options.nccl_blocking = *blocking;
  GENESIS_ASSIGN_OR_RETURN(std::optional<bool> register_buffers,
                           EnvSwitch(lookup, "GENESIS_NCCL_REGISTER"));
  if (register_buffers.has_value()) options.nccl_register_buffers = *register_buffers;
  return options;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ProcessGroup>> CreateGlooGroup(int rank, int size,
                                                              std::shared_ptr<Store> store,
                                                              const GroupOptions& options) {
  GENESIS_RETURN_IF_ERROR(CheckWorld(rank, size));
  if (store == nullptr) return absl::InvalidArgumentError("gloo group without a store");
  const std::string host = options.gloo_hostname.empty() ? "127.0.0.1" : options.gloo_hostname;
  GENESIS_ASSIGN_OR_RETURN(
      std::unique_ptr<Communicator> communicator,
      gloo_backend::ConnectGloo(Info("gloo", rank, size, Device::Cpu(), options),
                                std::move(store), host));
  return std::make_unique<ProcessGroup>(std::move(communicator));
}

absl::StatusOr<std::vector<char>> NewNcclUniqueId() { return nccl_backend::NewUniqueId(); }

absl::StatusOr<std::unique_ptr<ProcessGroup>> CreateNcclGroup(int rank, int size,
                                                              Device device,
                                                              absl::Span<const char> unique_id,
                                                              const GroupOptions& options) {
  GENESIS_RETURN_IF_ERROR(CheckWorld(rank, size));
  GENESIS_ASSIGN_OR_RETURN(
      std::unique_ptr<Communicator> communicator,
      nccl_backend::ConnectNccl(Info("nccl", rank, size, device, options), unique_id));
  return std::make_unique<ProcessGroup>(std::move(communicator));
}

absl::StatusOr<std::unique_ptr<ProcessGroup>> CreateNcclGroup(int rank, int size,
                                                              Device device, Store& store,
                                                              const GroupOptions& options) {
  GENESIS_RETURN_IF_ERROR(CheckWorld(rank, size));
  const std::string key = absl::StrCat(options.name, "/nccl_unique_id");
  std::vector<char> id;
  if (rank == 0) {
    GENESIS_ASSIGN_OR_RETURN(id, NewNcclUniqueId());
    GENESIS_RETURN_IF_ERROR(store.Set(key, id));
  } else {
    GENESIS_ASSIGN_OR_RETURN(id, store.Get(key, options.timeout));
  }
  return CreateNcclGroup(rank, size, device, id, options);
}

absl::StatusOr<nccl_backend::RegistrationStats> NcclBufferRegistration(ProcessGroup& group) {
  return nccl_backend::BufferRegistration(group.communicator());
}

absl::StatusOr<std::unique_ptr<ProcessGroup>> ProcessGroupFromEnvironment(
    Backend backend, const LaunchEnv& env, const EnvLookup& lookup,
    const GroupOptions& given) {
  GENESIS_ASSIGN_OR_RETURN(GroupOptions options, WithEnvironment(given, lookup));
  if (backend == Backend::kNccl) {
    if (!lookup("NCCL_COMM_ID").has_value()) {
      int port = env.master_port + 1;
      if (std::optional<std::string> value = lookup("GENESIS_NCCL_PORT")) {
        if (!absl::SimpleAtoi(*value, &port) || port < 1 || port > 65535) {
          return absl::InvalidArgumentError(absl::StrCat(
              "environment variable GENESIS_NCCL_PORT='", *value, "' is not a port"));
        }
      }
      const std::string comm_id = absl::StrCat(env.master_addr, ":", port);
      setenv("NCCL_COMM_ID", comm_id.c_str(), /*overwrite=*/0);
    }
    GENESIS_ASSIGN_OR_RETURN(std::vector<char> id, NewNcclUniqueId());
    return CreateNcclGroup(env.rank, env.world_size, Device::Cuda(env.local_rank), id,
                           options);
  }
  std::string directory = lookup("GENESIS_STORE_DIR").value_or("");
  if (directory.empty()) {
    if (!env.single_host()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a gloo group of ", env.world_size, " ranks on several hosts (LOCAL_WORLD_SIZE ",
          env.local_world_size, ") needs GENESIS_STORE_DIR, a directory every host sees"));
    }
    directory = absl::StrCat("/tmp/genesis-rendezvous-", env.run_id.empty() ? "run" : env.run_id,
                             "-", env.master_addr, "-", env.master_port);
  }
  GENESIS_ASSIGN_OR_RETURN(std::shared_ptr<Store> store, Store::File(directory));
  if (options.gloo_hostname.empty()) {
    options.gloo_hostname =
        lookup("GENESIS_GLOO_HOST").value_or(env.single_host() ? "127.0.0.1" : ThisHost());
  }
  return CreateGlooGroup(env.rank, env.world_size, std::move(store), options);
}

absl::StatusOr<std::unique_ptr<ProcessGroup>> ProcessGroupFromEnvironment(
    Backend backend, const GroupOptions& options) {
  GENESIS_ASSIGN_OR_RETURN(LaunchEnv env, ReadLaunchEnv());
  return ProcessGroupFromEnvironment(backend, env, ProcessEnv(), options);
}

}  // namespace genesis::distributed
