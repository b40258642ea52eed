#!/usr/bin/env bash
# issue_path_benchmark runs: its Gloo rows always, its NCCL rows or the reason they
# were skipped.
set -euo pipefail
out=$("$1" --ops=200 --repetitions=1)
echo "$out"
grep -Eq '^gloo group of one: all_reduce issued \(8 B\) +[0-9]+ ns$' <<<"$out"
grep -Eq '^(genesis nccl group of one|nccl rows skipped: )' <<<"$out"
