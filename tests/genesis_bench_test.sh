#!/usr/bin/env bash
# End-to-end checks of `genesis bench`: a quick run on this machine's devices (the CPU
# part in CI) writes a report whose tables parse, with plots where matplotlib is
# installed; bad flags fail with exit 2 naming the culprit; --compare of stored runs.
set -uo pipefail
genesis=$1
fixtures=$2  # A stored report directory; its siblings run_b and run_other too.
tmp=${TEST_TMPDIR:-/tmp}
out=$tmp/bench_report
failures=0

check() {  # check DESCRIPTION EXPECTED_EXIT PATTERN -- COMMAND...
  local what=$1 want_rc=$2 pattern=$3 output rc
  shift 4
  output=$("$@" 2>&1)
  rc=$?
  if [[ $rc -ne $want_rc ]] || ! grep -qE -- "$pattern" <<<"$output"; then
    echo "FAIL: $what: exit $rc (want $want_rc), output lacks /$pattern/:"
    echo "$output" | tail -30
    failures=$((failures + 1))
  else
    echo "ok: $what"
  fi
}

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# The quick run, with fewer repetitions and less time each to keep the test short.
check "bench --quick" 0 "report: $out/report.md" -- \
  "$genesis" bench --quick --bench_repetitions=2 --bench_min_time=0.002 --out="$out"
report=$out/report.md
[[ -s $report ]] || fail "no report at $report"
for suite in alloc copy convert contiguous replay; do
  grep -q "^## $suite: " "$report" || fail "report has no table for $suite"
  [[ -n $(ls "$out"/raw/"$suite"_cpu*.json 2>/dev/null) ]] || fail "no raw results of $suite"
done
grep -q '^## collectives: ' "$report" || fail "report has no table for collectives"
grep -q '^| all_reduce, 8 KiB | ' "$report" || fail "no all_reduce row (gloo group beside gloo)"
[[ -s $out/raw/collectives_cpu.json ]] || fail "no raw results of collectives"
if ! grep -q '^GPUs: none' "$report" || grep -q 'alloc_cuda.*: skipped: no GPU' "$report"; then
  echo "ok: GPU part reported (run or skipped with the reason)"
else
  fail "no GPU, yet the GPU suites are not reported as skipped"
fi
# Every Markdown table row has as many cells as its header.
awk -F'|' '
  /^\|/ { if (!in_table) { cells = NF; in_table = 1; tables++ } else if (NF != cells) { bad++; print "bad row: " $0 } next }
  { in_table = 0 }
  END { if (tables < 6 || bad > 0) { print "tables: " tables ", bad rows: " bad; exit 1 } }
' "$report" || fail "report tables do not parse"
grep -qE '^\| host pool, 512 B, 1 thread \| [0-9.]+ [num]s \| malloc \+ free \| [0-9.]+ [num]s \| [0-9.]+x \|' \
  "$report" || { grep -F "| host pool, 512 B" "$report"; fail "alloc row lacks figure, baseline and ratio"; }
python_with_matplotlib=""
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c 'import matplotlib' 2>/dev/null; then
    python_with_matplotlib=$p
    break
  fi
done
if [[ -n $python_with_matplotlib ]]; then
  for plot in alloc_cpu copy_Transposed copy_Rows; do
    [[ -s $out/plots/$plot.png ]] || fail "no plot $plot.png"
    grep -q "](plots/$plot.png)" "$report" || fail "report does not show $plot.png"
  done
else
  grep -q '^Plots skipped: matplotlib is not installed' "$report" || fail "plots neither drawn nor explained"
fi
grep -q '"benchmarks"' "$out/raw/alloc_cpu.json" || fail "raw results are not Google Benchmark JSON"

check "bench --json" 0 '"rows": \[' -- \
  "$genesis" bench --quick --suite=replay --devices=cpu --bench_repetitions=1 --json --out="$tmp/json_report"
check "unknown suite" 2 "unknown suite 'nope'" -- "$genesis" bench --suite=alloc,nope
check "unknown device" 2 "unknown device 'tpu:0'" -- "$genesis" bench --devices=cpu,tpu:0
check "absent GPU" 2 "cuda:99 is not on this machine" -- "$genesis" bench --devices=cuda:99
check "unwritable output" 2 "cannot write the report to '/dev/null/report'" -- \
  "$genesis" bench --out=/dev/null/report
check "unexpected argument" 2 "unexpected argument 'extra'" -- "$genesis" bench extra
check "compare needs two directories" 2 "name two report directories" -- \
  "$genesis" bench --compare "$fixtures"
check "compare of stored runs: faster" 0 "faster: 1" -- \
  "$genesis" bench --compare "$fixtures" "$(dirname "$fixtures")/run_b"
check "compare of stored runs: slower" 0 "BM_Malloc/512/real_time/threads:1 .* \+100\.[0-9]%" -- \
  "$genesis" bench --compare "$fixtures" "$(dirname "$fixtures")/run_b"
check "compare across machines warns" 0 "different machines" -- \
  "$genesis" bench --compare "$fixtures" "$(dirname "$fixtures")/run_other"
check "compare --json" 0 '"same_machine": false' -- \
  "$genesis" bench --compare "$fixtures" "$(dirname "$fixtures")/run_other" --json
check "compare of a missing directory" 2 "no/such: no benchmark results" -- \
  "$genesis" bench --compare no/such "$fixtures"
check "compare of this run with itself" 0 "within noise" -- "$genesis" bench --compare "$out" "$out"

((failures == 0)) && echo "all checks passed"
exit $((failures > 0))
