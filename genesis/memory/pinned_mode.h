// How the pinned (page-locked) host memory pool obtains its memory: the choice that
// GENESIS_ALLOC_CONF's `pinned_mode` key makes (alloc_config.h) and PinnedHostBackend
// (pinned_backend.h, CUDA builds only) carries out. A header of its own so that the
// configuration parser, which the CPU-only build compiles as well, needs no CUDA code.
#ifndef GENESIS_MEMORY_PINNED_MODE_H_
#define GENESIS_MEMORY_PINNED_MODE_H_

#include <string_view>

namespace genesis::memory {

enum class PinnedMode {
  // cudaHostAlloc(cudaHostAllocPortable): the driver allocates and pins the memory.
  kAlloc,
  // Ordinary page-aligned host memory, pinned afterwards with
  // cudaHostRegister(cudaHostRegisterPortable) and unpinned before it is freed.
  kRegister,
};

// "alloc" or "register": the spelling GENESIS_ALLOC_CONF uses.
constexpr std::string_view PinnedModeName(PinnedMode mode) {
  return mode == PinnedMode::kRegister ? "register" : "alloc";
}

}  // namespace genesis::memory

#endif  // GENESIS_MEMORY_PINNED_MODE_H_
