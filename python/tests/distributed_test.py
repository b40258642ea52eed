"""Process groups from Python: two ranks started as torchrun starts them (its variables
set by hand), every collective checked over Gloo and (on two GPUs) over NCCL, and the
launcher variables' errors."""

import os
import socket
import subprocess
import sys
import unittest
import uuid

import genesis

RANK_PROGRAM = r"""
import genesis
g = genesis.distributed.init_process_group("gloo", timeout=60)
r, n = g.rank, g.size
x = genesis.full((4,), float(r + 1))
g.all_reduce(x)
assert x.tolist() == [3.0] * 4, x.tolist()
m = genesis.full((2,), float(r + 1))
g.all_reduce(m, "max")
assert m.tolist() == [2.0, 2.0], m.tolist()
b = genesis.arange(3, dtype=genesis.float32) if r == 0 else genesis.zeros(3)
g.broadcast(b, 0)
assert b.tolist() == [0.0, 1.0, 2.0], b.tolist()
out = genesis.zeros(n, 2)
g.all_gather(out, genesis.full((2,), float(r)))
assert out.tolist() == [[0.0, 0.0], [1.0, 1.0]], out.tolist()
rs = genesis.zeros(2)
g.reduce_scatter(rs, genesis.ones(2 * n))
assert rs.tolist() == [2.0, 2.0], rs.tolist()
if r == 0:
    g.send(genesis.full((3,), 7.0), 1)
else:
    got = genesis.zeros(3)
    g.recv(got, 0)
    assert got.tolist() == [7.0] * 3, got.tolist()
w = g.all_reduce(genesis.ones(8), async_op=True)
w.wait(timeout=30)
assert w.is_completed()
g.barrier()
try:
    g.all_reduce(genesis.ones(2), "median")
    raise SystemExit("a bad op was accepted")
except ValueError as e:
    assert "median" in str(e), e
print("rank", r, "ok")
"""

# Two ranks on two GPUs: every operation at sizes that take the one-shot kernel (in
# lines, in bulk: up to 4 MiB a rank sends by default) and NCCL's (beyond).
NCCL_RANK_PROGRAM = r"""
import genesis
g = genesis.distributed.init_process_group("nccl", timeout=60)
r, n = g.rank, g.size
dev = "cuda:%d" % r


def same(x, value, what):
    got = x.to("cpu").tolist()
    bad = [i for i, v in enumerate(got) if v != value]
    assert not bad, (what, bad[:3], got[bad[0]])


for count in (1, 1000, 16384, 131072, 1 << 20, 1 << 21):
    x = genesis.full((count,), float(r + 1), device=dev)
    g.all_reduce(x)
    same(x, 3.0, ("all_reduce", count))
    b = genesis.full((count,), float(r + 5), device=dev)
    g.broadcast(b, 1)
    same(b, 6.0, ("broadcast", count))
    out = genesis.zeros(n, count, device=dev)
    g.all_gather(out, genesis.full((count,), float(r), device=dev))
    for q in range(n):
        same(out[q], float(q), ("all_gather", count, q))
    rs = genesis.zeros(count, device=dev)
    g.reduce_scatter(rs, genesis.full((n * count,), 2.0, device=dev))
    same(rs, 4.0, ("reduce_scatter", count))
    if r == 0:
        g.send(genesis.full((count,), 7.0, device=dev), 1)
    else:
        got = genesis.zeros(count, device=dev)
        g.recv(got, 0)
        same(got, 7.0, ("recv", count))
w = g.all_reduce(genesis.ones(8, device=dev), async_op=True)
w.wait(timeout=30)
assert w.is_completed()
g.barrier()
print("rank", r, "ok")
"""

# The same group with all_reduces from 1 MiB on the copy engines: sums of every size
# around the 16 MiB pieces, and what they leave to NCCL (integers).
NCCL_COPY_ENGINE_PROGRAM = r"""
import genesis
g = genesis.distributed.init_process_group("nccl", timeout=60, nccl_copy_engine_bytes=1 << 20)
r = g.rank
dev = "cuda:%d" % r
for count in (1 << 18, (1 << 22) + 3, 10 << 20):
    x = genesis.full((count,), float(r + 1), device=dev)
    g.all_reduce(x)
    got = x.to("cpu").tolist()
    assert all(v == 3.0 for v in got), ("all_reduce", count)
i = genesis.full((1 << 20,), r + 1, dtype=genesis.int32, device=dev)
g.all_reduce(i)
assert all(v == 3 for v in i.to("cpu").tolist())
print("rank", r, "ok")
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(program, size, extra_env=None, timeout=90):
    port = free_port()
    procs = []
    for rank in range(size):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "SLURM_"))}
        env.update({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(size),
                    "LOCAL_WORLD_SIZE": str(size), "MASTER_ADDR": "127.0.0.1",
                    "MASTER_PORT": str(port), "GENESIS_RUN_ID": uuid.uuid4().hex[:12]
                    if rank == 0 else "", "PYTHONPATH": os.pathsep.join(sys.path)})
        env.update(extra_env or {})
        procs.append(subprocess.Popen([sys.executable, "-c", program], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True))
    results = []
    for p in procs:
        out, _ = p.communicate(timeout=timeout)
        results.append((p.returncode, out))
    return results


class DistributedTest(unittest.TestCase):

    def test_two_gloo_ranks(self):
        run_id = uuid.uuid4().hex[:12]
        results = launch(RANK_PROGRAM, 2, {"GENESIS_RUN_ID": run_id})
        for rank, (rc, out) in enumerate(results):
            self.assertEqual(rc, 0, out)
            self.assertIn(f"rank {rank} ok", out)

    @unittest.skipUnless(genesis.cuda.device_count() >= 2, "needs two GPUs")
    def test_two_nccl_ranks(self):
        results = launch(NCCL_RANK_PROGRAM, 2, {"GENESIS_RUN_ID": uuid.uuid4().hex[:12]},
                         timeout=180)
        for rank, (rc, out) in enumerate(results):
            self.assertEqual(rc, 0, out)
            self.assertIn(f"rank {rank} ok", out)

    @unittest.skipUnless(genesis.cuda.device_count() >= 2, "needs two GPUs")
    def test_two_nccl_ranks_on_the_copy_engines(self):
        results = launch(NCCL_COPY_ENGINE_PROGRAM, 2,
                         {"GENESIS_RUN_ID": uuid.uuid4().hex[:12]}, timeout=180)
        for rank, (rc, out) in enumerate(results):
            self.assertEqual(rc, 0, out)
            self.assertIn(f"rank {rank} ok", out)

    def test_launcher_variables(self):
        env = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
               "MASTER_PORT": str(free_port()), "GENESIS_RUN_ID": uuid.uuid4().hex[:12],
               "GENESIS_DISTRIBUTED_TIMEOUT": "3"}
        program = ("import genesis, sys\n"
                   "try:\n"
                   "    genesis.distributed.init_process_group(sys.argv[1], timeout=3)\n"
                   "except Exception as e:\n"
                   "    print(type(e).__name__, e)\n")

        def run(backend, **overrides):
            e = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "SLURM_"))}
            e.update(env, PYTHONPATH=os.pathsep.join(sys.path))
            e.update(overrides)
            e = {k: v for k, v in e.items() if v is not None}
            return subprocess.run([sys.executable, "-c", program, backend], env=e, text=True,
                                  capture_output=True, timeout=60).stdout

        self.assertIn("RANK", run("gloo", RANK="5"))
        self.assertIn("WORLD_SIZE", run("gloo", WORLD_SIZE="two"))
        self.assertIn("not a backend: 'mpi'", run("mpi"))
        lonely = run("gloo")  # Rank 1 never comes: the group fails within the timeout.
        self.assertRegex(lonely, "TimeoutError|RuntimeError|rank 1")

    def test_nccl_registration_word_is_checked_first(self):
        # Refused before the launcher's variables are read or anything connects.
        with self.assertRaisesRegex(
                ValueError, "NCCL buffer registration 'yes' is not 0, 1, off, on or auto"):
            genesis.distributed.init_process_group("nccl", nccl_registration="yes")

    def test_nccl_one_shot_size_is_checked_first(self):
        with self.assertRaisesRegex(ValueError,
                                    r"nccl_one_shot_bytes = 4194305 \(at most 4194304\)"):
            genesis.distributed.init_process_group("nccl", nccl_one_shot_bytes=4194305)


if __name__ == "__main__":
    unittest.main()
