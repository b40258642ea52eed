#!/usr/bin/env bash
# Installs what the genesis build needs on Debian 12 (idempotent: a second run changes
# nothing), then checks the CUDA toolkit and says what its absence disables.
#   tools/setup.sh            install and check
#   tools/setup.sh --check    only report; exit 1 if a required package is missing
set -euo pipefail

readonly PACKAGES=(
  bazel-bootstrap bazel-rules-java bazel-platforms bazel-skylib  # Bazel 4.2.3, offline
  g++ pkg-config                                                 # toolchain
  libabsl-dev                                                    # abseil
  googletest libgtest-dev libgmock-dev                           # tests
  libbenchmark-dev                                               # benchmarks
  nlohmann-json3-dev                                             # JSON output
  libdlpack-dev                                                  # DLPack interop
  zlib1g-dev                                                     # gzip-compressed traces
  python3-matplotlib                                             # plots of genesis bench
  libgloo-dev                                                    # CPU collectives
  libhwy-dev                                                     # SIMD conversions
  libmimalloc2.0 libjemalloc2 libtcmalloc-minimal4               # allocator baselines
  openmpi-bin                                                    # mpirun launch tests
  python3-dev pybind11-dev                                       # the Python package
  python3-numpy python3-venv python3-wheel python3-setuptools    # its tests and wheel
)

check_only=0
[[ "${1:-}" == "--check" ]] && check_only=1

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  if ((check_only)); then
    echo "setup: missing Debian packages: ${missing[*]}" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "setup: all ${#PACKAGES[@]} Debian packages present"
fi

# The CUDA toolkit is optional: without it the CPU-only build is made (see README).
cuda="${CUDA_PATH:-/usr/local/cuda}"
cuda_missing=()
for f in bin/nvcc include/cuda_runtime_api.h; do
  [[ -e "$cuda/$f" ]] || cuda_missing+=("$cuda/$f")
done
if ! ls "$cuda"/lib64/libcudart_static.a "$cuda"/lib/libcudart_static.a >/dev/null 2>&1; then
  cuda_missing+=("$cuda/lib64/libcudart_static.a")
fi
if ((${#cuda_missing[@]})); then
  echo "setup: CUDA toolkit not found (${cuda_missing[*]}):"
  echo "       the CPU-only build will be made; CUDA kernels, GPU tests and GPU benchmarks"
  echo "       are disabled. Set CUDA_PATH to a toolkit to enable them."
else
  version=$("$cuda/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
  echo "setup: CUDA toolkit $version at $cuda"
  nccl_h=""; nccl_so=""
  for f in "$cuda/include/nccl.h" /usr/include/nccl.h; do [[ -e $f ]] && nccl_h=$f && break; done
  for f in "$cuda"/lib64/libnccl.so.2 "$cuda"/lib/libnccl.so.2 /usr/lib/*-linux-gnu/libnccl.so.2; do
    [[ -e $f ]] && nccl_so=$f && break
  done
  if [[ -n $nccl_h && -n $nccl_so ]]; then
    echo "setup: NCCL at $nccl_so"
  else
    echo "setup: NCCL not found (nccl.h and libnccl.so.2): multi-GPU communication is disabled"
  fi
fi
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "setup: GPUs: $(nvidia-smi -L | wc -l)"
else
  echo "setup: no GPU on this machine: GPU tests will skip, and say so"
fi
