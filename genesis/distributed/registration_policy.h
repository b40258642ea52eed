// Which operations of an NCCL group run on buffers registered with NCCL
// (ncclCommRegister): one policy that every rank applies alike.
//
// NCCL's rule is that in one operation either every rank's buffers are registered or
// none are: a registered rank and an unregistered peer run different protocols, and
// the operation hangs or gives wrong results. So whether an operation runs registered
// must not depend on where a rank's pool happened to place its buffers. It depends only
// on what every rank knows alike: the group's mode, the kind of operation and its size.
// The NCCL backend (nccl/nccl_communicator.h) then makes every buffer of such an
// operation registered on every rank, copying a buffer that cannot be registered
// through registered memory of its own, and issues every other operation on a
// communicator with nothing registered. Plain C++, so that it is tested anywhere.
#ifndef GENESIS_DISTRIBUTED_REGISTRATION_POLICY_H_
#define GENESIS_DISTRIBUTED_REGISTRATION_POLICY_H_

#include <cstddef>
#include <string_view>

#include "absl/status/statusor.h"

namespace genesis::distributed {

enum class NcclRegistration {
  kOff,   // No operation runs registered: NCCL copies buffers through its own.
  kAuto,  // Where registration was measured faster on NVLink (docs/distributed.md):
          // all_gather whose output has kAutoRegistrationMinBytes to
          // kAutoRegistrationMaxBytes; all_to_all of kAutoAllToAllRegistrationMinBytes,
          // and each message of a batch of sends and receives of
          // kAutoMessageRegistrationMinBytes, to kAutoRegistrationMaxBytes.
  kOn,    // Every collective, all_to_all and batch of sends and receives.
};

// The all_gather outputs that run registered under kAuto. On two and four H200s,
// registered all_gather took 0.79-0.98 of the unregistered time from 16 MiB; at 1 MiB
// it took up to 1.6 times as long. Above 64 MiB (the device pool's largest piece by
// default) a buffer never lies in one piece, so it would always be copied through the
// staging area, and the copy costs more than registration saves (a 256 MiB all_gather
// took 1.15 times as long on two H200s).
inline constexpr size_t kAutoRegistrationMinBytes = size_t{16} << 20;
inline constexpr size_t kAutoRegistrationMaxBytes = size_t{64} << 20;
// The all_to_all inputs and the messages that run registered under kAuto, up to
// kAutoRegistrationMaxBytes. On two and four H200s, registered all_to_all reached
// 1.03-1.46 of raw NCCL's bus bandwidth from 4 to 64 MiB and sends with receives
// 1.18-1.93, where unregistered both read 0.96-1.05; at 256 MiB (staged) they read
// 0.73-0.87. At 2 MiB sends with receives still gained (1.09 at two ranks, 1.21-1.22 at
// four, against 0.99-1.01 unregistered) and all_to_all did not (0.94-1.01 against
// 0.98-1.02); at 1 MiB neither gained at both sizes of group.
inline constexpr size_t kAutoAllToAllRegistrationMinBytes = size_t{4} << 20;
inline constexpr size_t kAutoMessageRegistrationMinBytes = size_t{2} << 20;

// The operations a policy tells apart.
enum class NcclOperation {
  kAllReduce,
  kBroadcast,
  kReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kSendRecv,
};

// Whether `op`, whose largest buffer has `bytes` bytes (all_gather: its output;
// kSendRecv: one message, sent or received), runs on registered buffers under `mode`.
// The same answer on every rank for the same call, and for a message at both its ends.
bool RunsRegistered(NcclRegistration mode, NcclOperation op, size_t bytes);

// "off", "auto" or "on".
std::string_view NcclRegistrationName(NcclRegistration mode);

// "0" or "off", "auto", "1" or "on" (as GENESIS_NCCL_REGISTER spells them);
// InvalidArgument naming `text` and what it may be otherwise.
absl::StatusOr<NcclRegistration> ParseNcclRegistration(std::string_view text);

}  // namespace genesis::distributed

#endif  // GENESIS_DISTRIBUTED_REGISTRATION_POLICY_H_
