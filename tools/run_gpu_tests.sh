#!/usr/bin/env bash
# Runs every test binary of a GPU bundle (tools/gpu_bundle.sh) and ends with
# "N passed, N failed". Tests that skip for lack of a device count as passed, and their
# skip messages are shown. Exits non-zero if any test failed.
#   run_gpu_tests.sh [--gtest_filter=...]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH="$here${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export NCCL_NVLS_ENABLE=0  # NVLink multicast stays off on shared machines
passed=0
failed=0
failures=()
for t in "$here"/tests/*; do
  [[ -x $t && -f $t ]] || continue
  name=$(basename "$t")
  start=$EPOCHREALTIME
  out=$("$t" "$@" 2>&1)
  rc=$?
  secs=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  skipped=$(grep -c '^\[  SKIPPED \] [A-Za-z]' <<<"$out" || true)
  if ((rc == 0)); then
    passed=$((passed + 1))
    note=""
    ((skipped > 0)) && note=", $skipped skipped"
    echo "PASS $name (${secs} s$note)"
    grep -A1 ': Skipped$' <<<"$out" | grep -vE ': Skipped$|^--$' | sort -u | sed 's/^/     skip: /' | head -3
  else
    failed=$((failed + 1))
    failures+=("$name")
    echo "FAIL $name (exit $rc, ${secs} s)"
    echo "$out" | tail -40 | sed 's/^/     /'
  fi
done
((failed)) && echo "failed: ${failures[*]}"
echo "$passed passed, $failed failed"
((failed == 0))
