"""The pools' statistics and controls from Python, with the documents' names."""

import gc
import unittest

import genesis

SEED_KEYS = ["allocated_bytes", "cached_bytes", "reserved_bytes", "inactive_split_bytes",
             "active_bytes", "cache_hit_rate", "num_allocations", "num_cache_hits",
             "num_cache_misses", "peak_allocated", "peak_cached"]


class DeviceMemoryTest(unittest.TestCase):

    def setUp(self):
        self.cpu = genesis.device("cpu")
        gc.collect()

    def test_counts_follow_allocations(self):
        self.cpu.reset_memory_stats()
        before = self.cpu.memory_allocated()
        x = genesis.empty(1 << 20, dtype=genesis.uint8)
        self.assertGreaterEqual(self.cpu.memory_allocated() - before, 1 << 20)
        self.assertGreaterEqual(self.cpu.max_memory_allocated(), before + (1 << 20))
        self.assertGreaterEqual(self.cpu.memory_reserved(), self.cpu.memory_allocated())
        del x
        self.assertEqual(self.cpu.memory_allocated(), before)
        self.assertGreaterEqual(self.cpu.memory_cached(), 1 << 20)
        self.assertGreaterEqual(self.cpu.max_memory_cached(), 1 << 20)
        self.cpu.empty_cache()
        self.assertLess(self.cpu.memory_cached(), 1 << 20)

    def test_stats_have_both_vocabularies(self):
        self.cpu.reset_memory_stats()
        for _ in range(10):
            genesis.empty(1000)
        stats = self.cpu.memory_stats()
        for key in SEED_KEYS:
            self.assertIn(key, stats)
        self.assertEqual(stats["num_allocations"], 10)
        self.assertEqual(stats["num_cache_hits"] + stats["num_cache_misses"], 10)
        self.assertAlmostEqual(stats["cache_hit_rate"], stats["num_cache_hits"] / 10)
        self.assertEqual(stats["allocated_bytes.all.current"], stats["allocated_bytes"])
        self.assertIn("reserved_bytes.large_pool.peak", stats)
        self.assertIn("inactive_split_bytes.small_pool.freed", stats)
        self.assertEqual(len([k for k in stats if k.count(".") == 2]), 72)

    def test_summary_and_snapshot(self):
        x = genesis.empty(3 << 20, dtype=genesis.uint8)
        self.assertIn("allocated", self.cpu.memory_summary().lower())
        segments = self.cpu.memory_snapshot()
        blocks = [b for s in segments for b in s["blocks"] if b["state"] == "active_allocated"]
        self.assertTrue(any(b["address"] <= x.data_ptr < b["address"] + b["size"] for b in blocks))
        self.assertTrue(all(s["total_size"] >= s["allocated_size"] for s in segments))

    def test_module_functions(self):
        stats = genesis.memory_stats("cpu")
        self.assertEqual(stats.allocated_bytes, stats["allocated_bytes"])
        self.assertIsInstance(stats.fragmentation_ratio(), float)
        with self.assertRaises(AttributeError):
            stats.no_such_key
        keep = genesis.empty(2 << 20, dtype=genesis.uint8)
        detailed = genesis.detailed_memory_stats("cpu")
        self.assertGreaterEqual(detailed.total_allocated, 2 << 20)
        large = detailed.get_large_allocations(min_size=1 << 20)
        self.assertTrue(any(a["size"] >= 2 << 20 for a in large))
        self.assertEqual(large, sorted(large, key=lambda a: -a["size"]))
        del keep
        genesis.empty_cache()
        genesis.empty_cache("cpu")
        genesis.memory_manager.collect_garbage()
        genesis.memory_manager.compact()
        self.assertEqual(genesis.device("cpu").memory_cached(), 0)

    def test_cuda_module_without_a_gpu(self):
        if genesis.cuda.is_available():
            self.skipTest("a GPU is visible")
        self.assertEqual(genesis.cuda.device_count(), 0)
        self.assertTrue(genesis.cuda.no_device_reason())
        with self.assertRaisesRegex((ValueError, RuntimeError), "cuda:0"):
            genesis.cuda.memory_allocated()
        with self.assertRaisesRegex(ValueError, "not a CUDA device"):
            genesis.cuda.memory_allocated("cpu")
        self.assertIn("version", genesis.info())


class SettingsTest(unittest.TestCase):

    def test_settings_before_the_first_pool(self):
        import os
        import subprocess
        import sys
        program = (
            "import genesis\n"
            "print(genesis.cuda.set_cache_size('2GB'))\n"
            "print(genesis.cuda.set_memory_fraction(0.5))\n"
            "for bad in [lambda: genesis.cuda.set_memory_fraction(1.5),\n"
            "            lambda: genesis.cuda.set_cache_size('lots')]:\n"
            "    try:\n"
            "        bad(); print('accepted')\n"
            "    except ValueError as e:\n"
            "        print('ValueError', e)\n"
            "genesis.zeros(1)\n"
            "try:\n"
            "    genesis.cuda.set_cache_size('1GB')\n"
            "except RuntimeError as e:\n"
            "    print('RuntimeError', e)\n")
        out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                             env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
                             timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("cache_limit:1953125KiB", out.stdout)  # 2 GB, exactly
        self.assertIn("memory_fraction:0.5", out.stdout)
        self.assertNotIn("accepted", out.stdout)
        self.assertEqual(out.stdout.count("ValueError"), 2)
        self.assertIn("RuntimeError", out.stdout)
        self.assertIn("already exists", out.stdout)


if __name__ == "__main__":
    unittest.main()
