#!/usr/bin/env bash
# End-to-end checks of the `genesis` command: exit codes, readable and JSON output, and
# the messages for bad usage.
set -uo pipefail
genesis=$1
trace=$2
failures=0
bad_trace=${TEST_TMPDIR:-/tmp}/bad.trace
printf 'alloc 0x1000 512 0\nfree_completed 0x2000 512 0\n' >"$bad_trace"
stepped_trace=${TEST_TMPDIR:-/tmp}/stepped.trace
printf 'alloc 0x1000 4194304 0\n# step 1\nalloc 0x2000 512 0\nfree_completed 0x2000 512 0\n# step 2\nalloc 0x3000 8388608 0\n' >"$stepped_trace"

check() {  # check DESCRIPTION EXPECTED_EXIT PATTERN -- COMMAND...
  local what=$1 want_rc=$2 pattern=$3 out rc
  shift 4
  out=$("$@" 2>&1)
  rc=$?
  if [[ $rc -ne $want_rc ]] || ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL: $what: exit $rc (want $want_rc), output lacks /$pattern/:"
    echo "$out" | head -30
    failures=$((failures + 1))
  else
    echo "ok: $what"
  fi
}

# On a machine without a GPU, info succeeds and says why there is none; with GPUs it
# lists them. Either way the versions line is there.
check "info" 0 "^host: [0-9]+ CPUs" -- "$genesis" info
check "info names GPUs or why there are none" 0 "^GPUs: " -- "$genesis" info
check "info --json" 0 '"device_count": [0-9]+' -- "$genesis" info --json
check "info --json has versions" 0 '"cuda_runtime_code"' -- "$genesis" info --json
check "no command" 2 "Commands:" -- "$genesis"
check "help" 0 "info +devices" -- "$genesis" help
check "unknown command" 2 "unknown command 'nope'" -- "$genesis" nope
check "unexpected argument" 2 "unexpected argument 'extra'" -- "$genesis" info extra
check "replay a real trace" 0 "reserved/allocated" -- "$genesis" replay "$trace"
check "replay --json" 0 '"reserved_over_allocated"' -- "$genesis" replay "$trace" --json
check "replay with settings" 0 "max_split_size:256MiB" -- "$genesis" replay "$trace" --alloc_conf=max_split_size:256MiB
check "replay reports each marked step" 0 "stepped.trace +2 +1 +" -- "$genesis" replay "$stepped_trace"
check "replay --json has the steps" 0 '"steps": \[' -- "$genesis" replay "$stepped_trace" --json
check "replay names the bad line" 1 "bad.trace:2:" -- "$genesis" replay "$bad_trace"
check "replay of a missing file" 1 "no/such.trace" -- "$genesis" replay no/such.trace
check "replay without traces" 2 "name one or more trace files" -- "$genesis" replay
check "replay with a bad setting" 2 "bogus" -- "$genesis" replay "$trace" --alloc_conf=bogus:1
out_dir=${TEST_TMPDIR:-/tmp}
check "replay --timeline writes a Chrome trace" 0 "reserved/allocated" -- "$genesis" replay "$stepped_trace" --timeline "$out_dir/replay_timeline.json"
check "the timeline has counters" 0 '"ph":"C"' -- cat "$out_dir/replay_timeline.json"
check "replay --timeline to an unwritable path" 2 "cannot create '/no/such/dir/t.json'" -- "$genesis" replay "$trace" --timeline /no/such/dir/t.json
check "replay --timeline takes one trace" 2 "take one trace" -- "$genesis" replay "$trace" "$trace" --timeline "$out_dir/t.json"
# An error alone: no header and no empty table after it.
out=$("$genesis" replay no/such.trace 2>/dev/null)
if [[ -n "$out" ]]; then
  echo "FAIL: replay of a missing file printed to stdout: $out"
  failures=$((failures + 1))
else
  echo "ok: replay of a missing file prints no table"
fi
check "unknown flag" 1 "Unknown command line flag 'nosuchflag'" -- "$genesis" info --nosuchflag

((failures == 0)) && echo "all checks passed"
exit $((failures > 0))
