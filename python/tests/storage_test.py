"""Storages from Python: factories, create_storage, views, copies and their errors."""

import unittest

import genesis


def live_bytes():
    return genesis.device("cpu").memory_allocated()


class FactoryTest(unittest.TestCase):

    def test_shapes_dtypes_and_values(self):
        x = genesis.zeros(2, 3)
        self.assertEqual(x.shape, (2, 3))
        self.assertEqual(x.dtype, genesis.float32)
        self.assertEqual(x.device, genesis.device("cpu"))
        self.assertEqual(x.tolist(), [[0.0] * 3] * 2)
        self.assertEqual(genesis.ones((2, 2), dtype="int32").tolist(), [[1, 1], [1, 1]])
        self.assertEqual(genesis.full([3], 2.5, dtype=genesis.float16).tolist(), [2.5] * 3)
        self.assertEqual(genesis.arange(5).tolist(), [0, 1, 2, 3, 4])
        self.assertEqual(genesis.arange(1, 2, 0.25, dtype=float).tolist(),
                         [1.0, 1.25, 1.5, 1.75])
        self.assertEqual(genesis.empty(4, 5, dtype=genesis.bfloat16).nbytes, 40)
        self.assertEqual(genesis.zeros(()).shape, ())
        self.assertEqual(genesis.zeros(()).item(), 0.0)

    def test_random(self):
        genesis.manual_seed(7)
        a = genesis.rand(1000).tolist()
        genesis.manual_seed(7)
        self.assertEqual(genesis.rand(1000).tolist(), a)
        self.assertTrue(all(0.0 <= v < 1.0 for v in a))
        n = genesis.randn(10000, dtype=genesis.float64).tolist()
        self.assertAlmostEqual(sum(n) / len(n), 0.0, delta=0.05)
        r = genesis.randint(3, 7, (500,)).tolist()
        self.assertEqual(set(r), {3, 4, 5, 6})
        self.assertEqual(genesis.randint(2, size=(2, 2)).dtype, genesis.int64)

    def test_options(self):
        x = genesis.empty(10, alignment=4096)
        self.assertEqual(x.data_ptr % 4096, 0)
        info = x.pool_info()
        self.assertEqual(info["pool"], "cpu")
        self.assertFalse(info["external"])
        self.assertGreaterEqual(info["block_bytes"], 40)
        self.assertEqual(info["alignment"], 4096)

    def test_bad_arguments_name_the_value(self):
        before = live_bytes()
        with self.assertRaisesRegex(ValueError, "-3"):
            genesis.zeros(2, -3)
        with self.assertRaisesRegex(ValueError, "complex64"):
            genesis.zeros(2, dtype="complex64")
        with self.assertRaisesRegex(ValueError, "gpu:0"):
            genesis.zeros(2, device="gpu:0")
        with self.assertRaisesRegex(ValueError, "must be an int"):
            genesis.zeros(2, 3.5)
        with self.assertRaisesRegex(ValueError, "alignment"):
            genesis.empty(4, alignment=3)
        with self.assertRaisesRegex(TypeError, "zeros.. got an unexpected keyword argument 'shape'"):
            genesis.zeros(4, shape=3)
        with self.assertRaisesRegex(ValueError, "high"):
            genesis.randint(5, 5, (2,))
        self.assertEqual(live_bytes(), before)

    def test_cuda_without_a_gpu(self):
        if genesis.cuda.is_available():
            self.skipTest("a GPU is visible")
        before = live_bytes()
        with self.assertRaisesRegex((ValueError, RuntimeError), "cuda:0"):
            genesis.zeros(2, device="cuda")
        self.assertEqual(live_bytes(), before)

    def test_out_of_memory(self):
        with self.assertRaises(genesis.OutOfMemoryError) as caught:
            genesis.empty(1 << 58, dtype=genesis.uint8)
        self.assertIsInstance(caught.exception, MemoryError)
        self.assertIsInstance(caught.exception, RuntimeError)
        self.assertIn("cpu", str(caught.exception))


class CreateStorageTest(unittest.TestCase):

    def test_nested_lists(self):
        s = genesis.create_storage([[1, 2, 3], [4, 5, 6]], genesis.device("cpu"))
        self.assertEqual(s.shape, (2, 3))
        self.assertEqual(s.dtype, genesis.int64)
        self.assertEqual(s.tolist(), [[1, 2, 3], [4, 5, 6]])
        self.assertEqual(genesis.create_storage([1.5, 2]).dtype, genesis.float32)
        self.assertEqual(genesis.create_storage([True, False]).tolist(), [True, False])
        self.assertEqual(genesis.create_storage(3.0).shape, ())
        self.assertEqual(genesis.create_storage([]).shape, (0,))
        self.assertEqual(genesis.create_storage([[], []]).shape, (2, 0))
        self.assertEqual(genesis.create_storage((1, 2), dtype="float64").tolist(), [1.0, 2.0])
        big = 2**62 + 1  # Exact: integers do not pass through double.
        self.assertEqual(genesis.create_storage([big]).tolist(), [big])
        self.assertEqual(genesis.tensor([1, 2], "cpu", genesis.int8).dtype, genesis.int8)

    def test_from_storages(self):
        a = genesis.arange(6).reshape(2, 3)
        b = genesis.create_storage(a, "cpu", genesis.float64)
        self.assertEqual(b.tolist(), [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])
        self.assertFalse(b.shares_memory_with(a))

    def test_data_of_the_wrong_shape(self):
        before = live_bytes()
        with self.assertRaisesRegex(ValueError, "not rectangular"):
            genesis.create_storage([[1, 2], [3]])
        with self.assertRaisesRegex(ValueError, "not rectangular"):
            genesis.create_storage([[1, 2], 3])
        with self.assertRaisesRegex(ValueError, "not rectangular"):
            genesis.create_storage([1, [2]])
        with self.assertRaisesRegex(ValueError, "'a' is not a number"):
            genesis.create_storage([1, "a"])
        with self.assertRaisesRegex(ValueError, "does not fit in int64"):
            genesis.create_storage([2**70])
        self.assertEqual(live_bytes(), before)


class ViewTest(unittest.TestCase):

    def setUp(self):
        self.x = genesis.arange(12, dtype=genesis.float32).reshape(3, 4)

    def test_indexing(self):
        self.assertEqual(self.x[1].tolist(), [4.0, 5.0, 6.0, 7.0])
        self.assertEqual(self.x[-1, 2].item(), 10.0)
        self.assertEqual(self.x[:, 1].tolist(), [1.0, 5.0, 9.0])
        self.assertEqual(self.x[0:3:2, ::3].tolist(), [[0.0, 3.0], [8.0, 11.0]])
        self.assertTrue(self.x[1:].shares_memory_with(self.x))
        with self.assertRaisesRegex(IndexError, "index 3 is out of range"):
            self.x[3]
        with self.assertRaisesRegex(IndexError, "too many indices"):
            self.x[0, 0, 0]
        with self.assertRaisesRegex(ValueError, "step must be positive"):
            self.x[::-1]
        with self.assertRaisesRegex(ValueError, "int or a slice"):
            self.x["a"]
        self.assertEqual([row.tolist()[0] for row in self.x], [0.0, 4.0, 8.0])

    def test_layout_views(self):
        t = self.x.T
        self.assertEqual(t.shape, (4, 3))
        self.assertFalse(t.is_contiguous())
        self.assertEqual(t.strides, (1, 4))
        c = t.contiguous()
        self.assertTrue(c.is_contiguous())
        self.assertEqual(c.tolist()[0], [0.0, 4.0, 8.0])
        self.assertEqual(self.x.transpose(0, 1).tolist(), c.tolist())
        self.assertEqual(self.x.permute(1, 0).shape, (4, 3))
        self.assertEqual(self.x.view(12).shape, (12,))
        self.assertEqual(self.x.unsqueeze(0).shape, (1, 3, 4))
        self.assertEqual(self.x.unsqueeze(0).squeeze(0).shape, (3, 4))
        self.assertEqual(self.x[0].expand(2, 4).tolist()[1], [0.0, 1.0, 2.0, 3.0])
        self.assertEqual(self.x.slice(1, 1, 3).shape, (3, 2))
        self.assertEqual(self.x.select(0, 2).tolist(), [8.0, 9.0, 10.0, 11.0])
        with self.assertRaisesRegex(ValueError, "12"):
            self.x.reshape(5, 5)

    def test_copies(self):
        y = self.x.clone()
        self.assertFalse(y.shares_memory_with(self.x))
        y[0] = 7
        self.assertEqual(y[0].tolist(), [7.0] * 4)
        self.assertEqual(self.x[0].tolist(), [0.0, 1.0, 2.0, 3.0])
        y[1] = self.x[2]
        self.assertEqual(y[1].tolist(), [8.0, 9.0, 10.0, 11.0])
        h = self.x.to(genesis.bfloat16)
        self.assertEqual(h.dtype, genesis.bfloat16)
        self.assertEqual(h.to("float32").tolist(), self.x.tolist())
        self.assertEqual(self.x.to("cpu").tolist(), self.x.tolist())
        z = genesis.zeros(3, 4, dtype=genesis.int32)
        self.assertIs(z.copy_(self.x), z)
        self.assertEqual(z.tolist()[2], [8, 9, 10, 11])
        z.fill_(3).zero_()
        self.assertEqual(z.tolist()[0], [0] * 4)
        self.assertIs(self.x.cpu().shares_memory_with(self.x), True)
        with self.assertRaisesRegex(ValueError, "shape"):
            z.copy_(genesis.zeros(2))
        with self.assertRaisesRegex(ValueError, "cannot copy"):
            z[0] = "x"

    def test_description(self):
        self.assertEqual(self.x.ndim, 2)
        self.assertEqual(self.x.numel(), 12)
        self.assertEqual(self.x.itemsize, 4)
        self.assertEqual(self.x.size_bytes(), 48)
        self.assertEqual(len(self.x), 3)
        self.assertIn("float32[3, 4] cpu", repr(self.x))
        self.assertEqual(repr(genesis.float32), "genesis.float32")
        self.assertEqual(str(genesis.bfloat16), "bfloat16")
        self.assertEqual(genesis.float16.itemsize, 2)
        self.assertEqual(genesis.device("cuda:1").index, 1)
        self.assertEqual(genesis.device("cuda").type, "cuda")
        self.assertEqual(genesis.device("cuda:2"), "cuda:2")
        self.assertEqual(len({genesis.device("cpu"), genesis.device("cpu")}), 1)
        with self.assertRaisesRegex(TypeError, "0-d"):
            len(genesis.zeros(()))


class CopyTest(unittest.TestCase):

    def test_copy_storage_and_batches(self):
        src = [genesis.full((100,), float(i)) for i in range(5)]
        dst = [genesis.zeros(100) for _ in range(5)]
        genesis.batch_copy(src, dst)
        self.assertEqual([d[0].item() for d in dst], [0.0, 1.0, 2.0, 3.0, 4.0])
        self.assertIn("request", genesis.plan_batch_copy(src, dst))
        one = genesis.zeros(100)
        genesis.copy_storage(src[3], one)
        self.assertEqual(one[99].item(), 3.0)
        pending = genesis.copy_storage_async(src[4], one)
        pending.wait()
        self.assertTrue(pending.done())
        self.assertEqual(one[0].item(), 4.0)
        batch = genesis.BatchStorage(src)
        moved = batch.to("cpu")
        self.assertEqual(len(moved), 5)
        self.assertFalse(moved[2].shares_memory_with(src[2]))
        target = genesis.BatchStorage([genesis.zeros(100) for _ in range(5)])
        self.assertIs(target.copy_(batch), target)
        self.assertEqual(target[4][7].item(), 4.0)
        with self.assertRaises(IndexError):
            target[5]

    def test_host_copies_shared_among_threads(self):
        self.assertEqual(genesis.host_copy_threads(), 1)
        with self.assertRaisesRegex(ValueError, "-1 threads"):
            genesis.set_host_copy_threads(-1)
        self.assertEqual(genesis.host_copy_threads(), 1)
        n = 1100  # 4.6 MiB of float32: shared among threads.
        x = genesis.arange(0, n * n, 1, dtype=genesis.float32).reshape(n, n)
        expected = x.transpose(0, 1).contiguous().tolist()
        try:
            for threads in (4, 0):
                genesis.set_host_copy_threads(threads)
                self.assertEqual(genesis.host_copy_threads(), threads)
                self.assertEqual(x.transpose(0, 1).contiguous().tolist(), expected)
        finally:
            genesis.set_host_copy_threads(1)

    def test_bad_batches_name_the_pair(self):
        with self.assertRaisesRegex(ValueError, "2.*1|1.*2"):
            genesis.batch_copy([genesis.zeros(2), genesis.zeros(2)], [genesis.zeros(2)])
        with self.assertRaisesRegex(ValueError, "pair 1"):
            genesis.batch_copy([genesis.zeros(2), genesis.zeros(3)],
                               [genesis.zeros(2), genesis.zeros(2)])
        with self.assertRaisesRegex(ValueError, "shape"):
            genesis.copy_storage(genesis.zeros(2), genesis.zeros(3))


if __name__ == "__main__":
    unittest.main()
