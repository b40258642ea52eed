"""genesis as PyTorch's CUDA allocator (genesis.torch). Each case runs in a fresh
process, since PyTorch's allocator is chosen before CUDA starts. Skips without a GPU or
PyTorch."""

import os
import subprocess
import sys
import textwrap
import unittest

import genesis

try:
    import torch  # noqa: F401
except ImportError:
    torch = None


def run(program, timeout=240):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(program)], env=env,
                          capture_output=True, text=True, timeout=timeout)
    return done.returncode, done.stdout + done.stderr


class TorchSettingsTest(unittest.TestCase):
    """The pools' settings under PyTorch (no GPU or PyTorch needed: no pool is made)."""

    def settings(self, program, env):
        environ = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        environ.pop("GENESIS_ALLOC_CONF", None)
        environ.update(env)
        done = subprocess.run([sys.executable, "-c", textwrap.dedent(program)],
                              env=environ, capture_output=True, text=True, timeout=120)
        self.assertEqual(done.returncode, 0, done.stdout + done.stderr)
        return done.stdout.strip().splitlines()[-1]

    def test_torch_defaults_then_the_callers_settings(self):
        out = self.settings("""
            from genesis import _torch_settings as ts
            print(ts.set_torch_config("thread_cache_bytes:4MiB,memory_fraction:0.5"))
        """, {})
        self.assertIn("expandable_piece_size:16MiB", out)
        self.assertIn("expandable_min_piece:2MiB", out)
        self.assertIn("thread_cache_bytes:4MiB", out)  # The caller's, on top.
        self.assertIn("memory_fraction:0.5", out)

    def test_genesis_alloc_conf_replaces_the_torch_defaults(self):
        out = self.settings("""
            from genesis import _torch_settings as ts
            print(ts.set_torch_config(None))
        """, {"GENESIS_ALLOC_CONF": "expandable_piece_size:32MiB"})
        self.assertIn("expandable_piece_size:32MiB", out)
        self.assertNotIn("thread_cache_bytes:8MiB", out)

    def test_settings_that_do_not_parse_are_named(self):
        environ = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        done = subprocess.run(
            [sys.executable, "-c",
             "from genesis import _torch_settings as ts; "
             "ts.set_torch_config('thread_cache_bytes:lots')"],
            env=environ, capture_output=True, text=True, timeout=120)
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("ValueError", done.stderr)
        self.assertIn("thread_cache_bytes", done.stderr)


@unittest.skipUnless(torch is not None and genesis.cuda.is_available(),
                     "needs PyTorch and a GPU")
class TorchAllocatorTest(unittest.TestCase):

    def check(self, program):
        rc, out = run(program)
        self.assertEqual(rc, 0, out)
        self.assertIn("ok", out.splitlines()[-1] if out.strip() else "", out)
        return out

    def test_tensors_streams_empty_cache_and_oom(self):
        out = self.check("""
            import torch, genesis.torch as gt
            hooks = gt.use_as_allocator()
            print("hooks", hooks)
            x = torch.randn(1024, 1024, device="cuda")
            y = (x @ x).sum()
            stats = gt.memory_stats()
            assert stats["allocated_bytes"] >= 4 << 20, stats["allocated_bytes"]
            s = torch.cuda.Stream()
            with torch.cuda.stream(s):
                z = x * 2
            x.record_stream(s)
            del x
            torch.cuda.synchronize()
            del z, y
            reserved = gt.memory_stats()["reserved_bytes"]
            torch.cuda.empty_cache()
            after = gt.memory_stats()["reserved_bytes"]
            print("reserved", reserved, "after empty_cache", after)
            try:
                torch.empty(1 << 50, dtype=torch.uint8, device="cuda")
                raise SystemExit("no OOM")
            except RuntimeError as e:
                assert "could not allocate" in str(e), str(e)
                print("oom type", type(e).__name__, "is torch.OutOfMemoryError:",
                      isinstance(e, torch.OutOfMemoryError))
            w = torch.ones(1 << 20, device="cuda")
            assert float(w.sum()) == float(1 << 20)
            print("errors", gt.errors())
            print("ok")
            """)
        self.assertIn("hooks", out)

    def test_after_cuda_started_is_refused(self):
        self.check("""
            import torch, genesis.torch as gt
            torch.zeros(1, device="cuda")
            try:
                gt.use_as_allocator()
                raise SystemExit("accepted")
            except RuntimeError as e:
                assert "before CUDA is initialised" in str(e), e
            print("ok")
            """)

    def test_bad_configuration(self):
        self.check("""
            import genesis.torch as gt
            try:
                gt.use_as_allocator(conf="memory_fraction:7")
                raise SystemExit("accepted")
            except ValueError as e:
                assert "memory_fraction" in str(e), e
            assert not gt.is_installed()
            print("ok")
            """)

    def test_cuda_graph_capture(self):
        out = self.check("""
            import torch, genesis.torch as gt
            gt.use_as_allocator()
            x = torch.ones(256, device="cuda")
            g = torch.cuda.CUDAGraph()
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            try:
                with torch.cuda.stream(s):
                    with torch.cuda.graph(g):
                        y = x * 2
                g.replay()
                torch.cuda.synchronize()
                print("graph replay", float(y.sum()))
            except Exception as e:
                print("graph capture refused:", type(e).__name__, str(e)[:300])
            print("ok")
            """)
        self.assertRegex(out, "graph replay|graph capture refused")

    def test_mem_pool_route(self):
        self.check("""
            import torch, genesis, genesis.torch as gt
            before = genesis.device("cuda:0").memory_allocated()
            pool = gt.mem_pool()
            with torch.cuda.use_mem_pool(pool):
                x = torch.empty(8 << 20, dtype=torch.uint8, device="cuda")
            y = torch.empty(8 << 20, dtype=torch.uint8, device="cuda")  # torch's own
            inside = genesis.device("cuda:0").memory_allocated() - before
            assert inside >= 8 << 20, inside
            print("genesis holds", inside, "bytes for the pool's segment(s)")
            print("ok")
            """)


if __name__ == "__main__":
    unittest.main()
