"""DLPack and the array interface between genesis and NumPy: zero-copy both ways, memory
kept alive by either side, and the protocol's errors."""

import gc
import unittest

import numpy as np

import genesis


def live_bytes():
    return genesis.device("cpu").memory_allocated()


class ToNumpyTest(unittest.TestCase):

    def test_from_dlpack_shares_memory(self):
        s = genesis.arange(12, dtype=genesis.float32).reshape(3, 4)
        a = np.from_dlpack(s)  # Read-only in NumPy 1.x, whatever the producer says.
        self.assertEqual(a.shape, (3, 4))
        self.assertEqual(a.dtype, np.float32)
        self.assertEqual(a.__array_interface__["data"][0], s.data_ptr)
        s[0, 0] = 42
        self.assertEqual(a[0, 0], 42.0)
        w = np.asarray(s)  # The array interface: writable.
        w[2, 3] = -5
        self.assertEqual(s[2, 3].item(), -5.0)

    def test_views_keep_their_layout(self):
        s = genesis.arange(12, dtype=genesis.int32).reshape(3, 4)
        t = np.from_dlpack(s.T[1:])
        np.testing.assert_array_equal(t, np.arange(12, dtype=np.int32).reshape(3, 4).T[1:])
        self.assertEqual(t.__array_interface__["data"][0], s.T[1:].data_ptr)

    def test_memory_outlives_the_storage(self):
        before = live_bytes()
        s = genesis.full((1000,), 3.0, dtype=genesis.float64)
        a = np.from_dlpack(s)
        del s
        gc.collect()
        self.assertGreater(live_bytes(), before)
        self.assertEqual(float(a.sum()), 3000.0)
        del a
        gc.collect()
        self.assertEqual(live_bytes(), before)

    def test_array_interface(self):
        s = genesis.arange(6, dtype=genesis.int16).reshape(2, 3)
        a = np.asarray(s)
        self.assertEqual(a.dtype, np.int16)
        self.assertEqual(a.__array_interface__["data"][0], s.data_ptr)
        np.testing.assert_array_equal(np.asarray(s.T), a.T)
        with self.assertRaisesRegex(TypeError, "bfloat16"):
            np.asarray(genesis.zeros(2, dtype=genesis.bfloat16)).sum()

    def test_every_numpy_dtype(self):
        # NumPy 1.24 reads no bool from DLPack; the array interface carries it.
        self.assertEqual(np.asarray(genesis.ones(2, dtype="bool")).tolist(), [True, True])
        for name in ["uint8", "int8", "int16", "int32", "int64", "float16",
                     "float32", "float64"]:
            s = genesis.ones(3, dtype=name)
            a = np.from_dlpack(s)
            self.assertEqual(a.dtype, np.dtype(name), name)
            self.assertEqual(a.tolist(), s.tolist(), name)

    def test_capsule_protocol(self):
        s = genesis.zeros(2)
        self.assertEqual(s.__dlpack_device__(), (1, 0))
        with self.assertRaisesRegex(ValueError, "takes no stream"):
            s.__dlpack__(stream=1)
        with self.assertRaises(BufferError):
            s.__dlpack__(dl_device=(2, 0))
        copied = np.asarray(genesis.from_dlpack(s.__dlpack__(copy=True)))
        copied[0] = 1
        self.assertEqual(s[0].item(), 0.0)
        # A capsule nobody consumes frees its tensor when it goes.
        before = live_bytes()
        t = genesis.zeros(1000)
        capsule = t.__dlpack__()
        del t, capsule
        gc.collect()
        self.assertEqual(live_bytes(), before)


class FromNumpyTest(unittest.TestCase):

    def test_zero_copy(self):
        a = np.arange(20, dtype=np.float32).reshape(4, 5)
        s = genesis.from_dlpack(a)
        self.assertEqual(s.shape, (4, 5))
        self.assertEqual(s.dtype, genesis.float32)
        self.assertEqual(s.data_ptr, a.__array_interface__["data"][0])
        self.assertIsNone(s.pool_info()["pool"])
        a[1, 1] = -1
        self.assertEqual(s[1, 1].item(), -1.0)
        del a
        gc.collect()
        self.assertEqual(s[1].tolist(), [5.0, -1.0, 7.0, 8.0, 9.0])

    def test_strided_and_create_storage_copies(self):
        a = np.arange(24, dtype=np.int64).reshape(4, 6)[::2, 1::2]
        s = genesis.from_dlpack(a)
        self.assertEqual(s.tolist(), a.tolist())
        c = genesis.create_storage(a, "cpu", genesis.float64)
        self.assertEqual(c.tolist(), a.astype(np.float64).tolist())
        self.assertTrue(c.is_contiguous())
        self.assertNotEqual(c.data_ptr, s.data_ptr)

    def test_round_trip(self):
        s = genesis.randn(8, 8, dtype=genesis.float64)
        back = genesis.from_dlpack(np.asarray(s))
        self.assertEqual(back.data_ptr, s.data_ptr)
        self.assertEqual(back.tolist(), s.tolist())

    def test_bad_input(self):
        before = live_bytes()
        with self.assertRaisesRegex(ValueError, "complex"):
            genesis.from_dlpack(np.zeros(3, dtype=np.complex64))
        capsule = np.zeros(3).__dlpack__()
        genesis.from_dlpack(capsule)
        with self.assertRaisesRegex(ValueError, "already consumed"):
            genesis.from_dlpack(capsule)
        with self.assertRaisesRegex(ValueError, "neither a DLPack capsule"):
            genesis.from_dlpack([1, 2, 3])
        gc.collect()
        self.assertEqual(live_bytes(), before)


if __name__ == "__main__":
    unittest.main()
