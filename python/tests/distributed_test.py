"""Gloo process groups from Python: two ranks started as torchrun starts them (its
variables set by hand), every collective checked, and the launcher variables' errors."""

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
