"""The examples of Genesis's documents (shared/seeds: the memory API, memory management,
the storage layer, CUDA storage), run on cuda:0 when a GPU is visible and on the CPU
otherwise. Each test says where its example comes from and what was adapted: tensor
math the storage layer does not have (matmul, x + x) is replaced by a copy, and OOM
examples ask for more memory than any machine has."""

import gc
import io
import time
import unittest
import weakref
from contextlib import redirect_stdout

import genesis

DEVICE = "cuda" if genesis.cuda.is_available() else "cpu"


class MemoryApiExamples(unittest.TestCase):
    """memory-management-api.zh.md."""

    def setUp(self):
        self.out = io.StringIO()

    def test_memory_allocated(self):  # As written.
        with redirect_stdout(self.out):
            device = genesis.device(DEVICE)
            allocated = device.memory_allocated()
            print(f"已分配: {allocated / 1e6:.1f} MB")
        self.assertIn("MB", self.out.getvalue())

    def test_memory_stats(self):  # As written.
        genesis.empty(10, device=DEVICE)
        with redirect_stdout(self.out):
            device = genesis.device(DEVICE)
            stats = device.memory_stats()
            print(f"缓存命中率: {stats['cache_hit_rate']:.1%}")
            print(f"峰值内存: {stats['peak_allocated'] / 1e9:.2f} GB")
            print(f"分配次数: {stats['num_allocations']}")
        self.assertIn("%", self.out.getvalue())

    def test_summary_empty_cache_reset(self):  # As written (three examples).
        with redirect_stdout(self.out):
            device = genesis.device(DEVICE)
            print(device.memory_summary())
            device.empty_cache()
            device.reset_memory_stats()
        self.assertEqual(genesis.device(DEVICE).memory_stats()["num_allocations"], 0)

    def test_profile_memory(self):
        # Adapted: genesis.matmul(x, x.T) became x.T.contiguous() (a copy of the same size).
        with redirect_stdout(self.out):
            device = genesis.device(DEVICE)
            with genesis.profiler.profile_memory() as prof:
                x = genesis.rand(4096, 4096, device=device)
                y = x.T.contiguous()
                del x, y
            print(prof.memory_summary())
            print(f"峰值使用: {prof.peak_memory() / 1e6:.1f} MB")
        self.assertGreaterEqual(prof.peak_memory(), 2 * 4096 * 4096 * 4)

    def test_out_of_memory(self):
        # Adapted: 100000 x 100000 float32 (40 GB) fits an H200; this asks for 4 PB. The
        # example's `except RuntimeError` catches genesis.OutOfMemoryError as written; its
        # message starts "<device> OOM" and says what the pool holds (not "CUDA OOM").
        caught = None
        try:
            huge_tensor = genesis.zeros(1_000_000, 1_000_000, 1_000, device=DEVICE)  # noqa: F841
        except RuntimeError as e:
            caught = e
        self.assertIsInstance(caught, genesis.OutOfMemoryError)
        self.assertIn("could not allocate", str(caught))

    def test_hit_rate_loop(self):
        # Adapted: y = x + x became y = x.clone().
        with redirect_stdout(self.out):
            device = genesis.device(DEVICE)
            device.reset_memory_stats()
            for i in range(100):
                x = genesis.rand(1000, 1000, device=device)
                y = x.clone()
                del x, y
                if i % 10 == 0:
                    stats = device.memory_stats()
                    print(f"迭代 {i}: 缓存命中率: {stats['cache_hit_rate']:.1%}")
        self.assertGreater(genesis.device(DEVICE).memory_stats()["cache_hit_rate"], 0.9)

    def test_efficiency(self):
        # Adapted: a storage is held, so allocated_bytes is not 0 (the example divides).
        keep = genesis.empty(1 << 20, device=DEVICE)  # noqa: F841
        with redirect_stdout(self.out):
            device = genesis.device(DEVICE)
            stats = device.memory_stats()
            efficiency = stats['allocated_bytes'] / stats['reserved_bytes']
            fragmentation = 1 - (stats['active_bytes'] / stats['allocated_bytes'])
            print(f"内存效率: {efficiency:.1%}")
            print(f"碎片化: {fragmentation:.1%}")
        self.assertLessEqual(efficiency, 1.0)

    def test_memory_checkpoint(self):  # As written.
        with redirect_stdout(self.out):
            device = genesis.device(DEVICE)
            genesis.set_memory_debug(True)

            def memory_checkpoint(name):
                stats = device.memory_stats()
                print(f"{name}: {stats['allocated_bytes'] / 1e6:.1f}MB 已分配, "
                      f"{stats['cache_hit_rate']:.1%} 命中率")

            memory_checkpoint("开始")
            x = genesis.rand(4096, 4096, device=device)
            memory_checkpoint("分配后")
            del x
            memory_checkpoint("删除后")
            genesis.set_memory_debug(False)
        self.assertEqual(len(self.out.getvalue().splitlines()), 3)


class MemoryManagementExamples(unittest.TestCase):
    """memory-management.zh.md."""

    def test_stats_as_attributes(self):  # As written.
        out = io.StringIO()
        with redirect_stdout(out):
            stats = genesis.memory_stats()
            print(f"已分配：{stats.allocated_bytes / 1e9:.2f} GB")
            print(f"缓存：{stats.cached_bytes / 1e9:.2f} GB")
        self.assertIn("GB", out.getvalue())

    def test_optimize_and_monitor(self):  # As written.
        def optimize_memory_usage():
            genesis.empty_cache()
            genesis.memory_manager.collect_garbage()
            genesis.memory_manager.compact()

        def monitor_memory():
            stats = genesis.memory_stats()
            fragmentation = stats.fragmentation_ratio()
            if fragmentation > 0.3:
                genesis.memory_manager.compact()
            return fragmentation

        optimize_memory_usage()
        self.assertGreaterEqual(monitor_memory(), 0.0)

    def test_leak_detection(self):
        # Adapted: train_model() is an allocation kept alive on purpose. The location is
        # the innermost C++ frame of the call (the Python line is not recorded).
        genesis.enable_memory_debugging(True)
        kept = genesis.empty(1 << 20, device=DEVICE)  # noqa: F841
        leaks = genesis.check_memory_leaks()
        out = io.StringIO()
        with redirect_stdout(out):
            if leaks:
                print("检测到内存泄漏：")
                for leak in leaks:
                    print(f"  {leak.location}处的{leak.size}块节")
        genesis.enable_memory_debugging(False)
        self.assertIn("块节", out.getvalue())
        self.assertTrue(all(leak.location and leak.size >= 1 << 20 for leak in leaks))

    def test_profiler_report_and_timeline(self):
        # Adapted: create_model(), load_data() and model(data) are allocations, and
        # `y = x + 1` a copy; plot() is given a file to draw into.
        import os
        import tempfile
        genesis.enable_memory_profiling(True)
        x = genesis.tensor([1, 2, 3], device=DEVICE)
        y = x.clone()
        del x
        report = genesis.memory_profiler.get_report()
        self.assertIn("cpu" if DEVICE == "cpu" else "cuda", report.summary())
        genesis.enable_memory_profiling(False)
        with genesis.memory_profiler.record():
            model = genesis.zeros(1 << 20, device=DEVICE)
            data = genesis.rand(1 << 16, device=DEVICE)
            output = data.clone()
        timeline = genesis.memory_profiler.get_timeline()
        with tempfile.TemporaryDirectory() as d:
            path = timeline.plot(os.path.join(d, "timeline.png"))
            self.assertGreater(os.path.getsize(path), 0)
        self.assertGreaterEqual(genesis.memory_profiler.get_report().peak_memory(), 4 << 20)
        del model, data, output, y

    def test_analyze_memory_usage(self):  # As written.
        out = io.StringIO()
        with redirect_stdout(out):
            stats = genesis.detailed_memory_stats()
            print(f"总分配：{stats.total_allocated / 1e9:.2f} GB")
            print(f"峰值使用：{stats.peak_allocated / 1e9:.2f} GB")
            print(f"碎片灇：{stats.fragmentation_ratio:.2%}")
            print(f"缓存命不灇：{stats.cache_hit_rate:.2%}")
            large_allocs = stats.get_large_allocations(min_size=100 * 1024 * 1024)
        self.assertIsInstance(large_allocs, list)


class StorageExamples(unittest.TestCase):
    """storage-layer.zh.txt and cuda-storage.zh.md."""

    def test_create_and_inspect(self):  # As written (genesis.device("cuda") -> DEVICE).
        def inspect_storage(storage):
            info = {
                'shape': storage.shape,
                'dtype': storage.dtype,
                'device': storage.device,
                'size_bytes': storage.size_bytes(),
                'is_contiguous': storage.is_contiguous(),
                'data_ptr': hex(storage.data_ptr) if storage.data_ptr else None,
            }
            if storage.device.is_cuda:
                info['memory_pool'] = storage.pool_info()
            return info

        storage = genesis.create_storage([1, 2, 3], genesis.device(DEVICE))
        info = inspect_storage(storage)
        self.assertEqual(info["shape"], (3,))
        self.assertEqual(info["size_bytes"], 24)
        self.assertTrue(info["data_ptr"].startswith("0x"))

    def test_to_copy_clone(self):  # The Storage interface of the storage layer.
        s = genesis.create_storage([[1.0, 2.0], [3.0, 4.0]], genesis.device("cpu"))
        moved = s.to(genesis.device(DEVICE))
        back = genesis.zeros(2, 2)
        back.copy_(moved)
        self.assertEqual(back.tolist(), s.tolist())
        self.assertEqual(moved.clone().to("cpu").tolist(), s.tolist())

    def test_storage_tracker(self):  # As written; the tracker's weak references work.
        class StorageTracker:
            def __init__(self):
                self.active_storages = {}
                self.total_allocated = 0

            def register(self, storage):
                self.active_storages[id(storage)] = {
                    'storage': weakref.ref(storage),
                    'size': storage.size_bytes(),
                    'timestamp': time.time()
                }
                self.total_allocated += storage.size_bytes()

            def check_leaks(self):
                return [info for info in self.active_storages.values()
                        if info['storage']() is None]

        tracker = StorageTracker()
        s = genesis.zeros(100)
        tracker.register(s)
        self.assertEqual(tracker.check_leaks(), [])
        del s
        gc.collect()
        self.assertEqual(len(tracker.check_leaks()), 1)

    def test_cuda_memory_example(self):
        # cuda-storage.zh.md, as written; needs a GPU.
        if not genesis.cuda.is_available():
            self.skipTest("no GPU: " + genesis.cuda.no_device_reason())
        out = io.StringIO()
        with redirect_stdout(out):
            print(f"已分配内存: {genesis.cuda.memory_allocated() / 1024**2:.1f} MB")
            print(f"缓存内存: {genesis.cuda.memory_cached() / 1024**2:.1f} MB")
            x = genesis.randn(1000, 1000, device='cuda')
            print(f"创建张量后: {genesis.cuda.memory_allocated() / 1024**2:.1f} MB")
            del x
            genesis.cuda.empty_cache()
            print(f"清理后: {genesis.cuda.memory_allocated() / 1024**2:.1f} MB")
            snapshot = genesis.cuda.memory_snapshot()
            for entry in snapshot[:3]:
                print(f"地址: {entry['address']}, 大小: {entry['size']} bytes")
            genesis.cuda.synchronize()
        self.assertIn("清理后", out.getvalue())


if __name__ == "__main__":
    unittest.main()
