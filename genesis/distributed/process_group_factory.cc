#include "genesis/distributed/process_group_factory.h"

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

#include <unistd.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "genesis/core/status.h"
#include "genesis/cuda/device_query.h"
#include "genesis/distributed/gloo/gloo_communicator.h"
#include "genesis/distributed/internal/socket_checks.h"
#include "genesis/distributed/nccl/bootstrap_id.h"
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
  info.nccl_registration = options.nccl_registration;
  info.nccl_interop = options.nccl_interop;
  info.nccl_one_shot_bytes = options.nccl_one_shot_bytes;
  info.nccl_copy_engine_bytes = options.nccl_copy_engine_bytes;
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

// The environment's GENESIS_DISTRIBUTED_TIMEOUT, GENESIS_NCCL_BLOCKING,
// GENESIS_NCCL_REGISTER, GENESIS_NCCL_ONE_SHOT_BYTES and GENESIS_NCCL_COPY_ENGINE_BYTES
// applied to `options`.
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
  if (std::optional<std::string> value = lookup("GENESIS_NCCL_REGISTER")) {
    absl::StatusOr<NcclRegistration> mode = ParseNcclRegistration(*value);
    if (!mode.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("environment variable GENESIS_NCCL_REGISTER='", *value,
                       "' is not 0, 1, off, on or auto"));
    }
    options.nccl_registration = *mode;
  }
  if (std::optional<std::string> value = lookup("GENESIS_NCCL_ONE_SHOT_BYTES")) {
    uint64_t bytes = 0;
    if (!absl::SimpleAtoi(*value, &bytes) || bytes > nccl_backend::kOneShotMaxBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("environment variable GENESIS_NCCL_ONE_SHOT_BYTES='", *value,
                       "' is not a number of "
                       "bytes from 0 to ",
                       nccl_backend::kOneShotMaxBytes));
    }
    options.nccl_one_shot_bytes = bytes;
  }
  if (std::optional<std::string> value = lookup("GENESIS_NCCL_COPY_ENGINE_BYTES")) {
    uint64_t bytes = 0;
    if (!absl::SimpleAtoi(*value, &bytes)) {
      return absl::InvalidArgumentError(
          absl::StrCat("environment variable GENESIS_NCCL_COPY_ENGINE_BYTES='", *value,
                       "' is not a number of bytes"));
    }
    options.nccl_copy_engine_bytes = bytes;
  }
  return options;
}

// Sets an environment variable for the life of the object, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) previous_ = old;
    setenv(name, value.c_str(), /*overwrite=*/1);
  }
  ~ScopedEnv() {
    if (previous_.has_value()) {
      setenv(name_, previous_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> previous_;
};

// The address of NCCL's bootstrap root: NCCL_COMM_ID where the user set it, else
// MASTER_ADDR (resolved) and MASTER_PORT + 1 or GENESIS_NCCL_PORT.
absl::StatusOr<std::string> NcclRootAddress(const LaunchEnv& env, const EnvLookup& lookup) {
  if (std::optional<std::string> given = lookup("NCCL_COMM_ID")) return *given;
  int port = env.master_port + 1;
  if (std::optional<std::string> value = lookup("GENESIS_NCCL_PORT")) {
    if (!absl::SimpleAtoi(*value, &port) || port < 1 || port > 65535) {
      return absl::InvalidArgumentError(absl::StrCat(
          "environment variable GENESIS_NCCL_PORT='", *value, "' is not a port"));
    }
  } else if (port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MASTER_PORT=", env.master_port, " leaves no port for NCCL's bootstrap (MASTER_PORT + 1); "
        "set GENESIS_NCCL_PORT"));
  }
  GENESIS_ASSIGN_OR_RETURN(std::string ip, internal::ResolveHost("MASTER_ADDR", env.master_addr));
  if (env.rank == 0) {
    GENESIS_RETURN_IF_ERROR(internal::CheckCanListen(
        ip, port, "NCCL's bootstrap root: MASTER_PORT + 1, or GENESIS_NCCL_PORT"));
  }
  return internal::HostPort(ip, port);
}

// The NCCL world group of a launched job (process_group_factory.h).
absl::StatusOr<std::unique_ptr<ProcessGroup>> NcclWorld(const LaunchEnv& env,
                                                        const EnvLookup& lookup,
                                                        const GroupOptions& options) {
  GENESIS_ASSIGN_OR_RETURN(std::string version, nccl_backend::NcclVersion());
  const int gpus = cuda::DeviceCount();
  if (env.local_rank >= gpus) {
    return absl::InvalidArgumentError(absl::StrCat(
        "local rank ", env.local_rank, " (LOCAL_RANK or the launcher's local rank) has no GPU: ",
        gpus, " visible (CUDA_VISIBLE_DEVICES=",
        lookup("CUDA_VISIBLE_DEVICES").value_or("<unset>"), ")",
        gpus == 0 ? absl::StrCat(": ", cuda::NoDeviceReason()) : ""));
  }
  GENESIS_ASSIGN_OR_RETURN(const std::string root, NcclRootAddress(env, lookup));
  absl::StatusOr<std::unique_ptr<ProcessGroup>> group;
  {
    // Rank 0 starts the bootstrap root while NCCL_COMM_ID is set; later ids of this
    // process (NewNcclUniqueId) are random again.
    ScopedEnv comm_id("NCCL_COMM_ID", root);
    GENESIS_ASSIGN_OR_RETURN(std::vector<char> id, NewNcclUniqueId());
    // An NCCL whose id layout is unknown keeps its own (fixed) magic: the job still
    // forms, only without the protection from other jobs' ranks.
    absl::StatusOr<std::vector<char>> own = nccl_backend::WithBootstrapMagic(
        id, StableHash(absl::StrCat(env.job_key, "@", root)) | 1);
    group = CreateNcclGroup(env.rank, env.world_size, Device::Cuda(env.local_rank),
                            own.ok() ? *own : id, options);
  }
  if (!group.ok()) {
    return absl::Status(group.status().code(),
                        absl::StrCat(group.status().message(), " [NCCL ", version,
                                     "; bootstrap root (rank 0) at ", root, ", job key ",
                                     env.job_key, "]"));
  }
  return group;
}

// The Gloo world group of a launched job: a file store private to the job
// (process_group_factory.h), removed by the last rank whose group goes.
absl::StatusOr<std::unique_ptr<ProcessGroup>> GlooWorld(const LaunchEnv& env,
                                                        const EnvLookup& lookup,
                                                        GroupOptions options) {
  // Not connected to (the ranks meet in the store), but a name that does not resolve
  // is a mistake the user should hear of now.
  GENESIS_RETURN_IF_ERROR(internal::ResolveHost("MASTER_ADDR", env.master_addr).status());
  std::string base = lookup("GENESIS_STORE_DIR").value_or("");
  if (base.empty()) {
    if (!env.single_host()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a gloo group of ", env.world_size, " ranks on several hosts (local world size ",
          env.local_world_size, ") needs GENESIS_STORE_DIR, a directory every host sees"));
    }
    base = "/tmp";
  }
  const std::string directory =
      absl::StrCat(base, "/genesis-rendezvous-", env.job_key, "-", env.master_addr, "-",
                   env.master_port);
  GENESIS_ASSIGN_OR_RETURN(std::shared_ptr<Store> store,
                           Store::File(directory, /*shared=*/true));
  if (options.gloo_hostname.empty()) {
    options.gloo_hostname =
        lookup("GENESIS_GLOO_HOST").value_or(env.single_host() ? "127.0.0.1" : ThisHost());
  }
  absl::StatusOr<std::unique_ptr<ProcessGroup>> group =
      CreateGlooGroup(env.rank, env.world_size, std::move(store), options);
  if (!group.ok() && !env.job_key_unique) {
    return absl::Status(
        group.status().code(),
        absl::StrCat(group.status().message(), " [job key '", env.job_key,
                     "' may repeat from one launch to the next: a job with the same key "
                     "still running meets this one in ", directory,
                     "; set GENESIS_RUN_ID to a new value per launch]"));
  }
  return group;
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

absl::StatusOr<nccl_backend::OneShotStats> NcclOneShot(ProcessGroup& group) {
  const GroupInfo& info = group.communicator().info();
  if (info.backend != "nccl") {
    // The same answer in a build without NCCL.
    return absl::InvalidArgumentError(
        absl::StrCat("one-shot collectives are NCCL's: ", info.Describe(), " is not NCCL"));
  }
  return nccl_backend::OneShot(group.communicator());
}

absl::StatusOr<nccl_backend::CopyEngineStats> NcclCopyEngine(ProcessGroup& group) {
  const GroupInfo& info = group.communicator().info();
  if (info.backend != "nccl") {
    return absl::InvalidArgumentError(
        absl::StrCat("the copy engines' all_reduce is NCCL's: ", info.Describe(), " is not NCCL"));
  }
  return nccl_backend::CopyEngine(group.communicator());
}

absl::StatusOr<std::unique_ptr<ProcessGroup>> ProcessGroupFromEnvironment(
    Backend backend, const LaunchEnv& env, const EnvLookup& lookup,
    const GroupOptions& given) {
  GENESIS_ASSIGN_OR_RETURN(GroupOptions options, WithEnvironment(given, lookup));
  if (backend == Backend::kNccl) {
    // Refused before anything connects (ConnectNccl would, after the rendezvous).
    if (options.nccl_one_shot_bytes > nccl_backend::kOneShotMaxBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("nccl_one_shot_bytes = ", options.nccl_one_shot_bytes, " (at most ",
                       nccl_backend::kOneShotMaxBytes, ")"));
    }
    return NcclWorld(env, lookup, options);
  }
  return GlooWorld(env, lookup, std::move(options));
}

absl::StatusOr<std::unique_ptr<ProcessGroup>> ProcessGroupFromEnvironment(
    Backend backend, const GroupOptions& options) {
  GENESIS_ASSIGN_OR_RETURN(LaunchEnv env, ReadLaunchEnv());
  return ProcessGroupFromEnvironment(backend, env, ProcessEnv(), options);
}

}  // namespace genesis::distributed
