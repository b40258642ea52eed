#!/usr/bin/env bash
# Runs every test binary of a GPU bundle (tools/gpu_bundle.sh) and ends with
# "N passed, N failed". Tests that skip for lack of a device count as passed, and their
# skip messages are shown. Exits non-zero if any test failed.
#   run_gpu_tests.sh [--sanitize[=memcheck,racecheck,synccheck,initcheck]]
#                    [--only=NAME_PATTERN] [--gtest_filter=...]
# --sanitize runs each binary under compute-sanitizer once per tool (default: all four;
# memcheck with --leak-check full); a run passes only if the test passes and the tool
# reports no error. Each (binary, tool) pair counts as one run.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH="$here${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export NCCL_NVLS_ENABLE=0  # NVLink multicast stays off on shared machines

tools=("")
only=""
args=()
for a in "$@"; do
  case $a in
    --sanitize) tools=(memcheck racecheck synccheck initcheck) ;;
    --sanitize=*) IFS=, read -r -a tools <<<"${a#--sanitize=}" ;;
    --only=*) only=${a#--only=} ;;
    *) args+=("$a") ;;
  esac
done
if [[ -n ${tools[0]} ]] && ! command -v compute-sanitizer >/dev/null; then
  echo "run_gpu_tests.sh: --sanitize needs compute-sanitizer on the PATH" >&2
  exit 2
fi
# NCCL's own kernels read protocol flags in buffers that NCCL never initialises (its LL
# protocol polls them), synchronise through shared memory in ways racecheck reports as
# hazards, and split warps into roles that meet at named barriers from different branches,
# which synccheck reports as divergent (and then aborts the kernel): initcheck, racecheck
# and synccheck leave them out where they can (memcheck still checks their accesses to
# our buffers).
# (The help text is read whole first: `grep -q` in a pipe would stop reading at the first
# match, and under pipefail the SIGPIPE that compute-sanitizer may then get would turn the
# check false at random, leaving NCCL's kernels checked in some runs.)
nccl_exclude=()
if [[ -n ${tools[0]} ]]; then
  sanitizer_help=$(compute-sanitizer --help 2>&1)
  if grep -q -- --kernel-name-exclude <<<"$sanitizer_help"; then
    nccl_exclude=(--kernel-name-exclude kns=ncclDev)
  fi
fi

passed=0
failed=0
failures=()
for t in "$here"/tests/*; do
  [[ -x $t && -f $t ]] || continue
  name=$(basename "$t")
  [[ -n $only && $name != *$only* ]] && continue
  for tool in "${tools[@]}"; do
    label=$name
    cmd=("$t" "${args[@]}")
    if [[ -n $tool ]]; then
      label="$name [$tool]"
      extra=()
      [[ $tool == memcheck ]] && extra=(--leak-check full)
      [[ $tool != memcheck ]] && extra=("${nccl_exclude[@]}")
      # CUDA errors that tests provoke on purpose are not findings. Instrumented code
      # runs slower: tests that wait for NCCL stretch their timeouts.
      cmd=(env GENESIS_TEST_TIMEOUT_SCALE=4
           compute-sanitizer --tool "$tool" "${extra[@]}" --report-api-errors no
           --target-processes all --error-exitcode 99 "$t" "${args[@]}")
    fi
    start=$EPOCHREALTIME
    out=$("${cmd[@]}" 2>&1)
    rc=$?
    secs=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
    skipped=$(grep -c '^\[  SKIPPED \] [A-Za-z]' <<<"$out" || true)
    # compute-sanitizer ends with "ERROR SUMMARY: N errors"; leaks count as errors.
    sanitizer_errors=$(sed -n 's/.*ERROR SUMMARY: \([0-9]*\) error.*/\1/p' <<<"$out" | tail -1)
    if ((rc == 0)) && [[ -z $sanitizer_errors || $sanitizer_errors == 0 ]]; then
      passed=$((passed + 1))
      note=""
      ((skipped > 0)) && note=", $skipped skipped"
      echo "PASS $label (${secs} s$note)"
      grep -A1 ': Skipped$' <<<"$out" | grep -vE ': Skipped$|^--$' | sort -u | sed 's/^/     skip: /' | head -3
    else
      failed=$((failed + 1))
      failures+=("$label")
      echo "FAIL $label (exit $rc, ${secs} s${sanitizer_errors:+, $sanitizer_errors sanitizer errors})"
      echo "$out" | grep -E '^=========|FAILED|Failure' | head -30 | sed 's/^/     /'
      echo "$out" | tail -15 | sed 's/^/     /'
    fi
  done
done
((failed)) && echo "failed: ${failures[*]}"
echo "$passed passed, $failed failed"
((failed == 0))
