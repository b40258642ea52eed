"""genesis on a GPU from Python: CUDA storages, their pools, and zero-copy exchange with
PyTorch and CuPy (DLPack both ways, __cuda_array_interface__). Skips without a GPU, and
the PyTorch or CuPy parts without those libraries."""

import gc
import os
import pickle
import tempfile
import unittest

import genesis

HAVE_GPU = genesis.cuda.is_available()
try:
    import torch
except ImportError:
    torch = None
try:
    import cupy
except ImportError:
    cupy = None


@unittest.skipUnless(HAVE_GPU, "no GPU: %s" % genesis.cuda.no_device_reason())
class CudaStorageTest(unittest.TestCase):

    def test_factories_copies_and_stats(self):
        device = genesis.device("cuda:0")
        device.reset_memory_stats()
        before = device.memory_allocated()
        x = genesis.arange(12, dtype=genesis.float32, device="cuda").reshape(3, 4)
        self.assertEqual(x.device, device)
        self.assertEqual(x.tolist()[2], [8.0, 9.0, 10.0, 11.0])
        self.assertEqual(x.T.contiguous().to("cpu").tolist(), x.to("cpu").T.contiguous().tolist())
        self.assertEqual(x.to(genesis.bfloat16).to("cpu").to("float32").tolist(), x.tolist())
        y = genesis.zeros(3, 4, device="cuda")
        y.copy_(genesis.create_storage([[1.0] * 4] * 3))
        self.assertEqual(y.to("cpu").tolist(), [[1.0] * 4] * 3)
        self.assertGreater(device.memory_allocated(), before)
        self.assertEqual(genesis.cuda.memory_allocated(), device.memory_allocated())
        pinned = genesis.empty(1024, pinned=True)
        self.assertTrue(pinned.is_pinned)
        self.assertEqual(pinned.__dlpack_device__(), (3, 0))
        self.assertIn("allocated_bytes", genesis.pinned_memory_stats())
        del x, y
        genesis.cuda.synchronize()
        self.assertEqual(device.memory_allocated(), before)
        self.assertIsInstance(genesis.cuda.get_device_name(), str)
        self.assertGreaterEqual(genesis.cuda.get_device_capability()[0], 7)

    def test_bad_device_and_stream(self):
        with self.assertRaisesRegex(ValueError, "cuda:99"):
            genesis.zeros(2, device="cuda:99")
        with self.assertRaisesRegex(ValueError, "stream"):
            genesis.zeros(2, device="cuda").__dlpack__(stream=0)
        with self.assertRaisesRegex(ValueError, "not a CUDA stream"):
            genesis.zeros(2, device="cuda", stream=-5)

    def test_out_of_memory(self):
        with self.assertRaises(genesis.OutOfMemoryError) as caught:
            genesis.empty(1 << 50, dtype=genesis.uint8, device="cuda")
        self.assertIn("cuda:0", str(caught.exception))

    def test_profiler_snapshot_opens_in_torch_viewer(self):
        if torch is None:
            self.skipTest("no torch")
        from torch.cuda import _memory_viz
        with genesis.profiler.profile_memory() as prof:
            x = genesis.empty(8 << 20, dtype=genesis.uint8, device="cuda")
            del x
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "s.pickle")
            prof.export_memory_snapshot(path)
            with open(path, "rb") as f:
                snapshot = pickle.load(f)
            html = _memory_viz.trace_plot(snapshot)
            self.assertIn("<html", html.lower())
            self.assertTrue(_memory_viz.segment_plot(snapshot))


@unittest.skipUnless(HAVE_GPU and torch is not None, "needs a GPU and PyTorch")
class TorchExchangeTest(unittest.TestCase):

    def test_to_torch_and_back_without_a_copy(self):
        s = genesis.randn(256, 256, device="cuda")
        t = torch.from_dlpack(s)
        self.assertEqual(t.device, torch.device("cuda:0"))
        self.assertEqual(t.data_ptr(), s.data_ptr)
        self.assertEqual(t.shape, (256, 256))
        back = genesis.from_dlpack(t)
        self.assertEqual(back.data_ptr, s.data_ptr)
        value = s[0, 0].item()
        t.mul_(2)
        torch.cuda.synchronize()
        self.assertEqual(back[0, 0].item(), 2 * value)

    def test_torch_computes_on_genesis_memory(self):
        # The seeds' matmul, through PyTorch on genesis storages.
        x = genesis.rand(512, 512, device="cuda")
        tx = torch.from_dlpack(x)
        y = genesis.from_dlpack(tx @ tx.T)
        expected = (tx @ tx.T).cpu()
        self.assertTrue(torch.allclose(torch.from_dlpack(y.to("cpu")), expected, atol=1e-3))

    def test_memory_lives_while_either_side_holds_it(self):
        device = genesis.device("cuda:0")
        gc.collect()
        before = device.memory_allocated()
        s = genesis.ones(1 << 20, device="cuda")
        t = torch.from_dlpack(s)
        del s
        gc.collect()
        self.assertGreater(device.memory_allocated(), before)
        self.assertEqual(float(t.sum()), float(1 << 20))
        del t
        gc.collect()
        torch.cuda.synchronize()
        self.assertEqual(device.memory_allocated(), before)

    def test_bfloat16_and_views(self):
        s = genesis.arange(24, dtype=genesis.bfloat16, device="cuda").reshape(4, 6)
        t = torch.from_dlpack(s.T)
        self.assertEqual(t.dtype, torch.bfloat16)
        self.assertEqual(t.stride(), (1, 6))
        self.assertEqual(t.float().cpu().tolist(), s.T.to("float32").to("cpu").tolist())


@unittest.skipUnless(HAVE_GPU and cupy is not None, "needs a GPU and CuPy")
class CupyExchangeTest(unittest.TestCase):

    def test_both_ways(self):
        s = genesis.arange(10, dtype=genesis.float32, device="cuda")
        c = cupy.from_dlpack(s)
        self.assertEqual(c.data.ptr, s.data_ptr)
        self.assertEqual(c.tolist(), s.tolist())
        a = cupy.asarray(s)  # __cuda_array_interface__
        self.assertEqual(a.data.ptr, s.data_ptr)
        g = genesis.from_dlpack(cupy.arange(5, dtype=cupy.int64))
        self.assertEqual(g.device, genesis.device("cuda:0"))
        self.assertEqual(g.tolist(), [0, 1, 2, 3, 4])


if __name__ == "__main__":
    unittest.main()
