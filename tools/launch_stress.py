#!/usr/bin/env python3
"""Launch stress check: starts a distributed step many times, as users start it.

Launches a command (by default genesis/distributed's data_parallel_step) --runs times in
a row, in rounds of --concurrent jobs at once, under one launcher, and prints one line:

    torchrun nccl 2 ranks: 100 launches (1 at a time): 100 passed, 0 failed, 0 hung; \
median 6.9 s, max 8.1 s

A launch passes when the launcher exits 0 and every rank printed --ok_text; it hangs
when it has not ended after --timeout_s (its whole process group is then killed); else
it failed. With --expect=fail (faults on purpose), a launch passes when it exits
non-zero before the timeout and its output matches --fail_text.

Launchers:
  torchrun             torchrun --nproc_per_node=N --no-python (static rendezvous,
                       torchrun's defaults: MASTER_PORT 29500, run id "none")
  torchrun-standalone  the same with --standalone
  torchrun-c10d        --agents torchrun agents (--nnodes) meeting through
                       --rdzv-backend=c10d, each with N / agents ranks; --fake_hosts
                       gives each agent its own NCCL_HOSTID, so NCCL joins them through
                       its network transport as it would join two nodes
  env                  N processes with torchrun's variables set by hand (its defaults)
  slurm                N processes with srun's variables set by hand (a job id each)
  mpirun               Open MPI's mpirun -np N

Concurrent jobs get ports 100 apart, and each launch its own run or job id where the
launcher has one. Everything after "--" is the command (--binary and --args otherwise).
"""

import argparse
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass


@dataclass
class Outcome:
    """How one launch ended."""

    verdict: str  # "passed", "failed" or "hung"
    seconds: float
    output: str


def rank_env(base: dict, launcher: str, rank: int, n: int, port: int, job: str) -> dict:
    """The variables a launcher would give rank `rank` of `n` on this host."""
    env = dict(base)
    if launcher == "env":
        env.update(RANK=str(rank), WORLD_SIZE=str(n), LOCAL_RANK=str(rank),
                   LOCAL_WORLD_SIZE=str(n), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   TORCHELASTIC_RUN_ID="none", TORCHELASTIC_RESTART_COUNT="0")
    elif launcher == "slurm":
        env.update(SLURM_PROCID=str(rank), SLURM_NTASKS=str(n), SLURM_LOCALID=str(rank),
                   SLURM_NTASKS_PER_NODE=str(n), SLURM_JOB_ID=job, SLURM_STEP_ID="0")
    return env


def launcher_commands(args, command: list, port: int, job: str, scratch: str) -> list:
    """(argv, env) of each process this launch starts directly."""
    env = dict(os.environ)
    env.setdefault("NCCL_NVLS_ENABLE", "0")
    n = args.nproc
    if args.launcher in ("env", "slurm"):
        return [(command, rank_env(env, args.launcher, r, n, port, job)) for r in range(n)]
    if args.launcher == "mpirun":
        root = ["--allow-run-as-root"] if os.geteuid() == 0 else []
        return [(["mpirun", *root, "--oversubscribe", "--bind-to", "none", "-np", str(n),
                  *command], env)]
    torchrun = [args.torchrun]
    if args.launcher == "torchrun":
        if port != 29500:
            torchrun += [f"--master-port={port}"]
        return [(torchrun + [f"--nproc_per_node={n}", "--no-python", *args.torchrun_args,
                             *command], env)]
    if args.launcher == "torchrun-standalone":
        return [(torchrun + ["--standalone", f"--nproc_per_node={n}", "--no-python",
                             *args.torchrun_args, *command], env)]
    # torchrun-c10d: several agents on this host, as on several nodes.
    agents = args.agents
    per_agent = n // agents
    env["GENESIS_STORE_DIR"] = scratch  # A directory every "host" sees.
    result = []
    for a in range(agents):
        agent_env = dict(env)
        if args.gpus_per_agent:
            first = a * args.gpus_per_agent
            agent_env["CUDA_VISIBLE_DEVICES"] = ",".join(
                str(first + g) for g in range(args.gpus_per_agent))
        if args.fake_hosts:
            agent_env["NCCL_HOSTID"] = f"genesis-node-{a}"
        result.append((torchrun + [f"--nnodes={agents}", f"--nproc_per_node={per_agent}",
                                   "--rdzv-backend=c10d",
                                   f"--rdzv-endpoint=127.0.0.1:{port}", f"--rdzv-id={job}",
                                   "--no-python", *args.torchrun_args, *command], agent_env))
    return result


def start(args, command: list, port: int) -> tuple:
    """Starts one launch; returns its processes, output files and start time."""
    job = f"{os.getpid()}{uuid.uuid4().int % 100000:05d}"
    scratch = tempfile.mkdtemp(prefix="genesis-stress-")
    procs = []
    for argv, env in launcher_commands(args, command, port, job, scratch):
        out = tempfile.TemporaryFile()
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        procs.append((proc, out))
    return procs, scratch, time.monotonic()


def finish(args, procs: list, scratch: str, began: float) -> Outcome:
    """Waits for a launch (killing it at the timeout) and judges it."""
    deadline = began + args.timeout_s
    hung = False
    for proc, _ in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            hung = True
            break
    seconds = time.monotonic() - began
    if hung:
        for proc, _ in procs:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    pass
                try:
                    proc.wait(timeout=5)
                    break
                except subprocess.TimeoutExpired:
                    continue
    output = ""
    for _, out in procs:
        out.seek(0)
        output += out.read().decode(errors="replace")
        out.close()
    subprocess.run(["rm", "-rf", scratch], check=False)
    if hung:
        return Outcome("hung", seconds, output)
    codes = [proc.returncode for proc, _ in procs]
    if args.expect == "fail":
        ok = any(c != 0 for c in codes) and re.search(args.fail_text, output) is not None
    else:
        oks = len(re.findall(args.ok_text, output)) if args.ok_text else args.nproc
        ok = all(c == 0 for c in codes) and oks >= args.nproc
    return Outcome("passed" if ok else "failed", seconds, output)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--launcher", required=True,
                        choices=["torchrun", "torchrun-standalone", "torchrun-c10d", "env",
                                 "slurm", "mpirun"])
    parser.add_argument("--backend", default="gloo", help="passed as --backend=")
    parser.add_argument("--binary", default="data_parallel_step")
    parser.add_argument("--args", default="", help="more arguments of the binary")
    parser.add_argument("--nproc", type=int, default=2, help="ranks per launch")
    parser.add_argument("--agents", type=int, default=2, help="torchrun-c10d: agents")
    parser.add_argument("--gpus_per_agent", type=int, default=0,
                        help="torchrun-c10d: CUDA_VISIBLE_DEVICES per agent")
    parser.add_argument("--fake_hosts", action="store_true",
                        help="torchrun-c10d: a different NCCL_HOSTID per agent")
    parser.add_argument("--runs", type=int, default=10, help="launches in all")
    parser.add_argument("--concurrent", type=int, default=1, help="jobs at once")
    parser.add_argument("--port", type=int, default=29500, help="MASTER_PORT of job 0")
    parser.add_argument("--timeout_s", type=float, default=120)
    parser.add_argument("--max_seconds", type=float, default=0,
                        help="start no launch after this long (0: no limit); the line "
                             "then says how many ran")
    parser.add_argument("--expect", choices=["pass", "fail"], default="pass")
    parser.add_argument("--ok_text", default="step ok", help="each rank prints this")
    parser.add_argument("--fail_text", default=".", help="--expect=fail: output matches")
    parser.add_argument("--torchrun", default="torchrun")
    parser.add_argument("--torchrun_args", default="", help="more torchrun arguments")
    parser.add_argument("--show", type=int, default=1,
                        help="print the output of this many launches that went wrong")
    parser.add_argument("command", nargs="*", help="the command, after --")
    args = parser.parse_args()
    args.torchrun_args = shlex.split(args.torchrun_args)
    command = args.command or [args.binary, f"--backend={args.backend}",
                               *shlex.split(args.args)]
    if args.launcher == "torchrun-c10d" and args.nproc % args.agents:
        parser.error("--nproc must be a multiple of --agents")

    counts = {"passed": 0, "failed": 0, "hung": 0}
    times = []
    shown = 0
    done = 0
    began_all = time.monotonic()
    while done < args.runs:
        if args.max_seconds and time.monotonic() - began_all > args.max_seconds:
            break
        batch = min(args.concurrent, args.runs - done)
        launches = [start(args, command, args.port + 100 * j) for j in range(batch)]
        for procs, scratch, began in launches:
            outcome = finish(args, procs, scratch, began)
            counts[outcome.verdict] += 1
            times.append(outcome.seconds)
            if outcome.verdict != "passed" and shown < args.show:
                shown += 1
                print(f"--- launch {done + 1} {outcome.verdict} after {outcome.seconds:.1f} s:"
                      f"\n{outcome.output[-4000:]}---", file=sys.stderr)
        done += batch
    label = args.launcher + (f" ({args.agents} agents)" if args.launcher == "torchrun-c10d"
                             else "")
    expectation = " (failure expected)" if args.expect == "fail" else ""
    if not times:
        print(f"{label} {args.backend} {args.nproc} ranks: no launch within --max_seconds")
        return 1
    print(f"{label} {args.backend} {args.nproc} ranks: {done} launches "
          f"({args.concurrent} at a time){expectation}: {counts['passed']} passed, "
          f"{counts['failed']} failed, {counts['hung']} hung; median "
          f"{statistics.median(times):.1f} s, max {max(times):.1f} s", flush=True)
    return 0 if counts["passed"] == done else 1


if __name__ == "__main__":
    sys.exit(main())
