#!/usr/bin/env bash
# Launches of the data-parallel step (Gloo, CPU storages) as launchers start it, on this
# host: torchrun's variables set by hand with its defaults (three jobs in a row: the
# second used to read the first's file store), two jobs at once, Slurm's variables, Open
# MPI's mpirun where it is installed, a rank killed mid-step, and launch variables that
# are wrong. Uses tools/launch_stress.py, which prints one line per launcher.
set -uo pipefail
step=$1
stress=$2
failures=0
export GENESIS_DISTRIBUTED_TIMEOUT=20
export TMPDIR=${TEST_TMPDIR:-/tmp}

stress() {  # stress ARGS...: one line of tools/launch_stress.py; counts a failure
  if ! python3 "$stress" --binary="$step" --timeout_s=90 "$@"; then
    echo "FAIL: launch_stress.py $*"
    failures=$((failures + 1))
  fi
}

check() {  # check DESCRIPTION PATTERN -- ENV...: the step with ENV must exit 1 and print PATTERN
  local what=$1 pattern=$2 out rc
  shift 3
  out=$(env -i PATH="$PATH" "$@" timeout 60 "$step" --backend=gloo 2>&1)
  rc=$?
  if [[ $rc -ne 1 ]] || ! grep -qF -- "$pattern" <<<"$out"; then
    echo "FAIL: $what: exit $rc (want 1), output lacks '$pattern':"
    echo "$out" | head -20
    failures=$((failures + 1))
  else
    echo "ok: $what"
  fi
}

stress --launcher=env --nproc=2 --runs=3
stress --launcher=env --nproc=2 --runs=4 --concurrent=2
stress --launcher=env --nproc=4 --runs=2
stress --launcher=slurm --nproc=4 --runs=2
if command -v mpirun >/dev/null; then
  stress --launcher=mpirun --nproc=4 --runs=2
else
  echo "skipped: mpirun (Open MPI's openmpi-bin) is not installed"
fi
# A rank killed mid-step: the others fail within the timeout, naming the operation.
GENESIS_DISTRIBUTED_TIMEOUT=10 stress --launcher=env --nproc=3 --runs=1 \
  --args=--kill_rank=1 --expect=fail \
  --fail_text="rank [02] of 3 \(gloo on cpu\): [A-Z_]+: (broadcast|all_gather) of .* failed"

torchrun_vars=(RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500)
check "variables of two launchers" "TORCHELASTIC_RUN_ID (torchrun) and OMPI_COMM_WORLD_RANK" -- \
  "${torchrun_vars[@]}" TORCHELASTIC_RUN_ID=none OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2
check "RANK against SLURM_PROCID" "RANK='0' but SLURM_PROCID='1'" -- \
  "${torchrun_vars[@]}" SLURM_PROCID=1 SLURM_NTASKS=2
check "RANK beyond WORLD_SIZE" "rank RANK=2 is outside [0, 2)" -- \
  RANK=2 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500
check "no launcher" "no launcher environment" --
check "a malformed port" "MASTER_PORT='http' is not a number" -- \
  RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=http
check "a master address that does not resolve" "MASTER_ADDR='no-such-host.invalid' does not resolve" -- \
  RANK=0 WORLD_SIZE=2 MASTER_ADDR=no-such-host.invalid MASTER_PORT=29500
check "a rank alone fails within the timeout, naming who it waited for" \
  "waiting for rank(s) 0 of gloo group 'world' (rank 1 of 2) to join" -- \
  RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 GENESIS_RUN_ID="alone-$$" \
  GENESIS_DISTRIBUTED_TIMEOUT=2 GENESIS_STORE_DIR="$TMPDIR"

if ((failures)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all launch checks passed"
