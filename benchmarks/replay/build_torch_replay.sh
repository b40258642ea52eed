#!/usr/bin/env bash
# Builds torch_replay.cc (the PyTorch baseline of `genesis replay --device=cuda:N`) against
# the PyTorch that python3 imports, with the CUDA toolkit in CUDA_HOME (/usr/local/cuda by
# default), and prints the binary's path. Run it on a machine with PyTorch and a GPU:
#   $(benchmarks/replay/build_torch_replay.sh [OUT]) --expandable traces/*.trace.gz
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-${TMPDIR:-/tmp}/torch_replay}
cuda=${CUDA_HOME:-/usr/local/cuda}
torch=$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')
abi=$(python3 -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')
g++ -O2 -std=c++20 -D_GLIBCXX_USE_CXX11_ABI="$abi" "$here/torch_replay.cc" -o "$out" \
  -I"$torch/include" -I"$cuda/include" \
  -L"$torch/lib" -Wl,--no-as-needed -ltorch_cuda -ltorch_cpu -lc10_cuda -lc10 -Wl,--as-needed \
  -L"$cuda/lib64" -lcudart -Wl,-rpath,"$torch/lib"
echo "$out"
