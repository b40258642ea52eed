#!/usr/bin/env bash
# Builds the GPU tests, the benchmarks and the `genesis` command for a GPU machine (-c opt,
# abseil and cudart linked statically; libstdc++ and libgcc shared, as Debian's libgloo
# needs) and packs them, with the shared libraries such a machine lacks (Debian's
# libbenchmark, libgloo and its dependencies), into gpu_bundle/ (git-ignored).
# Set GENESIS_PYTHON_INCLUDE to the GPU machines' Python headers to build the Python
# package for them (see below).
# There, `gpu_bundle/run_gpu_tests.sh` runs every GPU test and ends with
# "N passed, N failed", and `gpu_bundle/genesis bench --out=DIR` runs the benchmark suite.
# NCCL is not packed (it is large): the machine's own is used.
# The folder is packed into gpu_bundle.tgz (git-ignored), which is what travels: unpack
# it there with `tar xzf gpu_bundle.tgz`.
# It also holds dlpack/: the DLPack C ABI as a shared library and the PyTorch round trip
# (`python3 gpu_bundle/dlpack/torch_roundtrip.py gpu_bundle/dlpack/libgenesis_dlpack_c.so`).
#   tools/gpu_bundle.sh [extra bazel flags, e.g. --//bazel:cuda_archs=sm_90,sm_100,compute_100]
set -euo pipefail
cd "$(dirname "$0")/.."
out=gpu_bundle
flags=(--config=bundle --config=cuda "$@")

tests=$(bazel query 'attr(tags, "\bgpu\b|\bmulti_gpu\b", tests(//...))' 2>/dev/null)
benchmarks=$(bazel query 'kind(cc_binary, //benchmarks/...)' 2>/dev/null || true)
targets=(//tools/genesis:genesis //genesis/distributed:data_parallel_step
         //genesis/distributed:join_nccl_id
         //examples/profile_memory:profile_memory $tests $benchmarks)
bazel build "${flags[@]}" "${targets[@]}"
bin=$(bazel info "${flags[@]}" bazel-bin 2>/dev/null)

rm -rf "$out"
mkdir -p "$out/tests" "$out/benchmarks"
copy() {  # copy LABEL DEST_DIR: the binary of LABEL, named after its package and name
  local label=$1 dir=$2 pkg name
  pkg=${label#//}; pkg=${pkg%%:*}; name=${label##*:}
  install -m 755 "$bin/$pkg/$name" "$dir/$(echo "$pkg" | tr / _)_$name"
}
install -m 755 "$bin/tools/genesis/genesis" "$out/genesis"
install -m 755 "$bin/genesis/distributed/data_parallel_step" "$out/data_parallel_step"
# Launch checks: the stress check of launchers, and a genesis rank beside CuPy's NCCL.
install -m 755 "$bin/genesis/distributed/join_nccl_id" "$out/join_nccl_id"
install -m 755 tools/launch_stress.py tools/nccl_interop_peer.py tools/launch_checks_gpu.sh "$out/"
# The memory profiler example (its picture script is built in; matplotlib draws it).
install -m 755 "$bin/examples/profile_memory/profile_memory" "$out/profile_memory"
for t in $tests; do copy "$t" "$out/tests"; done
for b in $benchmarks; do copy "$b" "$out/benchmarks"; done
# PyTorch's CPU baselines of genesis bench (run with the machine's python3).
install -m 755 benchmarks/torch/torch_cpu.py "$out/benchmarks/benchmarks_torch_torch_cpu.py"
cp -L "$(bazel info output_base)/external/com_github_google_benchmark/lib/libbenchmark.so" \
  "$out/libbenchmark.so.1debian"
install -m 755 tools/run_gpu_tests.sh "$out/run_gpu_tests.sh"
# The allocator baselines of allocator_benchmark (loaded with dlopen where found).
for lib in libmimalloc.so.2 libjemalloc.so.2 libtcmalloc_minimal.so.4; do
  found=$(ldconfig -p | awk -v l="$lib" '$1 == l && !f {print $NF; f = 1}')
  [[ -n "$found" ]] && cp -L "$found" "$out/$lib"
done
# Debian's Gloo (genesis/distributed's CPU backend) and the libraries it needs, which
# the GPU machines lack; and the torch.distributed baseline of the collective benchmark.
gloo=$(bazel info output_base)/external/gloo/lib/libgloo.so.0
cp -L "$gloo" "$out/"
ldd "$gloo" | awk '/libhiredis|libibverbs|libnl-/ {print $3}' | xargs -I{} cp -L {} "$out/"
# Debian's Highway (the storage layer's SIMD conversions), shared only.
cp -L "$(bazel info output_base)/external/hwy/lib/libhwy.so.1" "$out/"
install -m 755 benchmarks/distributed/torch_collectives.py "$out/torch_collectives.py"
install -m 755 benchmarks/distributed/torch_ddp_reducer.py "$out/torch_ddp_reducer.py"
# What `gpu_bundle/genesis bench` needs beside the benchmarks: the plot script and the
# traces of the replay suite (tools/genesis/bench_runner.h: the bundle layout).
install -m 755 tools/genesis/bench_plots.py "$out/bench_plots.py"
mkdir -p "$out/traces"
cp traces/*.trace.gz "$out/traces/"

# The DLPack C ABI for Python (tools/dlpack/torch_roundtrip.py), with the shared abseil
# libraries it links (Debian's; the GPU machines have none).
bazel build --config=pyext --config=cuda "$@" //tools/dlpack:libgenesis_dlpack_c.so
pyext_bin=$(bazel info --config=pyext --config=cuda "$@" bazel-bin 2>/dev/null)
mkdir -p "$out/dlpack"
install -m 755 "$pyext_bin/tools/dlpack/libgenesis_dlpack_c.so" "$out/dlpack/"
ldd "$out/dlpack/libgenesis_dlpack_c.so" | awk '/libabsl_|libhwy/ {print $3}' |
  xargs -I{} cp -L {} "$out/dlpack/"
install -m 755 tools/dlpack/torch_roundtrip.py "$out/dlpack/"

# The Python package (python/genesis, its tests and overhead benchmark), with the shared
# abseil libraries its extension links. Built for the Python whose headers
# GENESIS_PYTHON_INCLUDE names (the GPU machines' 3.12: third_party/python), else for
# this machine's. There: PYTHONPATH=gpu_bundle/python python3 -m unittest discover
#   -s gpu_bundle/python/tests -p '*_test.py'
bazel build "${flags[@]}" //python/genesis:_genesis
mkdir -p "$out/python/genesis" "$out/python/tests"
install -m 644 python/genesis/*.py "$out/python/genesis/"
install -m 755 "$bin/python/genesis/_genesis.so" "$out/python/genesis/"
ldd "$out/python/genesis/_genesis.so" | awk '/libabsl_|libhwy/ {print $3}' |
  xargs -I{} cp -L {} "$out/python/genesis/"
install -m 644 python/tests/*_test.py "$out/python/tests/"
install -m 755 python/benchmarks/overhead_benchmark.py benchmarks/torch/torch_training.py \
  benchmarks/torch/torch_allocation.py "$out/python/"

# What travels is the compressed archive (the binaries shrink about threefold).
tar czf gpu_bundle.tgz "$out"
size=$(du -m gpu_bundle.tgz | cut -f1)
echo "gpu_bundle.tgz: $(ls "$out/tests" | wc -l) tests, $(ls "$out/benchmarks" | wc -l) benchmarks, ${size} MiB"
if ((size >= 64)); then
  echo "gpu_bundle.tgz: over the 64 MiB that may travel to a GPU machine" >&2
  exit 1
fi
