"""genesis.profiler.profile_memory() and the leak check, from Python."""

import json
import os
import pickle
import tempfile
import unittest

import genesis


class ProfileMemoryTest(unittest.TestCase):

    def test_records_and_exports(self):
        with genesis.profiler.profile_memory(stacks=True) as prof:
            self.assertTrue(prof.running)
            x = genesis.empty(4 << 20, dtype=genesis.uint8)
            prof.mark("step 1")
            del x
        self.assertFalse(prof.running)
        self.assertIn("cpu", prof.memory_summary())
        self.assertGreaterEqual(prof.peak_memory(), 4 << 20)
        self.assertGreaterEqual(prof.peak_memory("cpu"), 4 << 20)
        with self.assertRaisesRegex(ValueError, "no pool named"):
            prof.peak_memory("cuda:9")
        self.assertEqual(prof.summary()["markers"], 1)
        large = prof.large_allocations(min_size=1 << 20)
        self.assertTrue(large and large[0]["freed"])
        with tempfile.TemporaryDirectory() as d:
            prof.export_chrome_trace(os.path.join(d, "t.json"))
            with open(os.path.join(d, "t.json")) as f:
                self.assertIn("traceEvents", json.load(f))
            prof.export_memory_snapshot(os.path.join(d, "s.pickle"))
            with open(os.path.join(d, "s.pickle"), "rb") as f:
                self.assertIn("segments", pickle.load(f))
            prof.export_replay_trace(os.path.join(d, "r.trace"))
            self.assertGreater(os.path.getsize(os.path.join(d, "r.trace")), 0)
            with self.assertRaises(Exception):
                prof.export_chrome_trace(os.path.join(d, "missing", "t.json"))

    def test_a_scope_records_once(self):
        prof = genesis.profiler.profile_memory()
        with prof:
            pass
        with self.assertRaisesRegex(RuntimeError, "once|started"):
            with prof:
                pass

    def test_leak_check(self):
        with self.assertRaisesRegex(RuntimeError, "enable_memory_profiling"):
            genesis.check_memory_leaks()
        genesis.enable_memory_profiling(True)
        try:
            kept = genesis.empty(1 << 20, dtype=genesis.uint8)
            freed = genesis.empty(1 << 20, dtype=genesis.uint8)
            del freed
            leaks = genesis.check_memory_leaks()
            self.assertEqual(sum(leak.count for leak in leaks), 1)
            self.assertGreaterEqual(leaks[0].size, 1 << 20)
            self.assertIn("Leak(", repr(leaks[0]))
            del kept
            self.assertEqual(genesis.check_memory_leaks(), [])
        finally:
            genesis.enable_memory_profiling(False)


if __name__ == "__main__":
    unittest.main()
