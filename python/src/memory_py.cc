// The pools' statistics and controls for Python: Device.memory_stats() and friends,
// the CUDA queries of genesis.cuda, and the process-wide controls.
#include <Python.h>

#include <cstdint>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "absl/strings/str_cat.h"
#include "genesis/core/device.h"
#include "genesis/cuda/device_query.h"
#include "genesis/cuda/stream.h"
#include "genesis/memory/alloc_config.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/memory_stats.h"
#include "genesis/memory/pool_registry.h"
#include "genesis/memory/segment_snapshot.h"
#include "python/src/arguments.h"
#include "python/src/bindings.h"
#include "python/src/errors.h"

namespace genesis::python {
namespace {

namespace py = pybind11;
using memory::CachingAllocator;
using memory::MemoryStat;
using memory::MemoryStats;
using memory::PoolMemoryStats;

CachingAllocator* Pool(const Device& device) { return Unwrap(memory::PoolFor(device)); }

// The dotted keys of torch.cuda.memory_stats ("allocated_bytes.all.current", ...), made
// once: building a dict from interned keys keeps memory_stats() to a few microseconds.
struct StatKeys {
  std::vector<py::object> dotted;  // 6 gauges x 3 pools x 4 metrics, in Fill's order.
  py::object allocated_bytes, cached_bytes, reserved_bytes, inactive_split_bytes,
      active_bytes, requested_bytes, cache_hit_rate, fragmentation_ratio, num_allocations,
      num_frees, num_cache_hits, num_cache_misses, num_ooms, num_alloc_retries, num_segments,
      num_segment_allocs, num_segment_frees, num_maps, num_unmaps, largest_free_block,
      peak_allocated, peak_cached, peak_reserved;
};

constexpr const char* kGauges[] = {"allocated_bytes", "cached_bytes",         "reserved_bytes",
                                   "active_bytes",    "inactive_split_bytes", "requested_bytes"};
constexpr const char* kPools[] = {"all", "small_pool", "large_pool"};
constexpr const char* kMetrics[] = {"current", "peak", "allocated", "freed"};

const StatKeys& Keys() {
  // Never destroyed: the interpreter may be gone when static destructors run.
  static const StatKeys* keys = [] {
    auto* k = new StatKeys;
    for (const char* gauge : kGauges) {
      for (const char* pool : kPools) {
        for (const char* metric : kMetrics) {
          k->dotted.push_back(py::str(absl::StrCat(gauge, ".", pool, ".", metric)));
        }
      }
    }
#define GENESIS_KEY(name) k->name = py::str(#name)
    GENESIS_KEY(allocated_bytes);
    GENESIS_KEY(cached_bytes);
    GENESIS_KEY(reserved_bytes);
    GENESIS_KEY(inactive_split_bytes);
    GENESIS_KEY(active_bytes);
    GENESIS_KEY(requested_bytes);
    GENESIS_KEY(cache_hit_rate);
    GENESIS_KEY(fragmentation_ratio);
    GENESIS_KEY(num_allocations);
    GENESIS_KEY(num_frees);
    GENESIS_KEY(num_cache_hits);
    GENESIS_KEY(num_cache_misses);
    GENESIS_KEY(num_ooms);
    GENESIS_KEY(num_alloc_retries);
    GENESIS_KEY(num_segments);
    GENESIS_KEY(num_segment_allocs);
    GENESIS_KEY(num_segment_frees);
    GENESIS_KEY(num_maps);
    GENESIS_KEY(num_unmaps);
    GENESIS_KEY(largest_free_block);
    GENESIS_KEY(peak_allocated);
    GENESIS_KEY(peak_cached);
    GENESIS_KEY(peak_reserved);
#undef GENESIS_KEY
    return k;
  }();
  return *keys;
}

void Set(py::dict& d, const py::object& key, int64_t value) {
  PyObject* v = PyLong_FromLongLong(value);
  if (v == nullptr || PyDict_SetItem(d.ptr(), key.ptr(), v) != 0) {
    Py_XDECREF(v);
    throw py::error_already_set();
  }
  Py_DECREF(v);
}

// The seeds' keys (allocated_bytes, cached_bytes, ... as current values of all pools;
// cache_hit_rate and fragmentation_ratio as floats; peak_allocated, peak_cached) and,
// beside them, torch.cuda.memory_stats's dotted keys.
py::dict StatsDict(const MemoryStats& stats) {
  const StatKeys& k = Keys();
  // Sized for every key at once: growing a dict of ~100 entries step by step cost a
  // fifth of the call.
  auto d = py::reinterpret_steal<py::dict>(_PyDict_NewPresized(static_cast<Py_ssize_t>(k.dotted.size()) + 32));
  if (!d) throw py::error_already_set();
  Set(d, k.allocated_bytes, stats.all.allocated_bytes.current);
  Set(d, k.cached_bytes, stats.all.cached_bytes.current);
  Set(d, k.reserved_bytes, stats.all.reserved_bytes.current);
  Set(d, k.inactive_split_bytes, stats.all.inactive_split_bytes.current);
  Set(d, k.active_bytes, stats.all.active_bytes.current);
  Set(d, k.requested_bytes, stats.all.requested_bytes.current);
  d[k.cache_hit_rate] = py::float_(stats.cache_hit_rate());
  d[k.fragmentation_ratio] = py::float_(stats.fragmentation_ratio());
  Set(d, k.peak_allocated, stats.all.allocated_bytes.peak);
  Set(d, k.peak_cached, stats.all.cached_bytes.peak);
  Set(d, k.peak_reserved, stats.all.reserved_bytes.peak);
  Set(d, k.num_allocations, stats.num_allocations);
  Set(d, k.num_frees, stats.num_frees);
  Set(d, k.num_cache_hits, stats.num_cache_hits);
  Set(d, k.num_cache_misses, stats.num_cache_misses);
  Set(d, k.num_ooms, stats.num_ooms);
  Set(d, k.num_alloc_retries, stats.num_alloc_retries);
  Set(d, k.num_segments, stats.num_segments);
  Set(d, k.num_segment_allocs, stats.num_segment_allocs);
  Set(d, k.num_segment_frees, stats.num_segment_frees);
  Set(d, k.num_maps, stats.num_maps);
  Set(d, k.num_unmaps, stats.num_unmaps);
  Set(d, k.largest_free_block, stats.largest_free_block);
  size_t i = 0;
  for (const MemoryStat PoolMemoryStats::*gauge :
       {&PoolMemoryStats::allocated_bytes, &PoolMemoryStats::cached_bytes,
        &PoolMemoryStats::reserved_bytes, &PoolMemoryStats::active_bytes,
        &PoolMemoryStats::inactive_split_bytes, &PoolMemoryStats::requested_bytes}) {
    for (const PoolMemoryStats* pool : {&stats.all, &stats.small_pool, &stats.large_pool}) {
      const MemoryStat& s = pool->*gauge;
      for (int64_t value : {s.current, s.peak, s.allocated, s.freed}) Set(d, k.dotted[i++], value);
    }
  }
  return d;
}

const char* StateName(memory::BlockState state) {
  switch (state) {
    case memory::BlockState::kAllocated: return "active_allocated";
    case memory::BlockState::kFree: return "inactive";
    case memory::BlockState::kPendingFree: return "active_pending_free";
    case memory::BlockState::kUnmapped: return "unmapped";
  }
  return "unknown";
}

// torch.cuda.memory_snapshot's shape: one dict per segment with its blocks.
py::list Snapshot(CachingAllocator* pool) {
  py::list segments;
  for (const CachingAllocator::SegmentSnapshot& seg : pool->Snapshot()) {
    py::dict s;
    s["address"] = reinterpret_cast<uintptr_t>(seg.address);
    s["total_size"] = seg.size;
    s["size"] = seg.size;
    s["mapped_bytes"] = seg.mapped_bytes;
    s["expandable"] = seg.expandable;
    s["stream"] = seg.stream;
    s["segment_type"] = seg.pool == memory::PoolKind::kSmall ? "small" : "large";
    py::list blocks;
    int64_t allocated = 0;
    for (const auto& b : seg.blocks) {
      py::dict block;
      block["address"] = reinterpret_cast<uintptr_t>(b.address);
      block["size"] = b.size;
      block["requested_size"] = b.requested;
      block["state"] = StateName(b.state);
      block["in_thread_cache"] = b.in_thread_cache;
      if (b.state == memory::BlockState::kAllocated) allocated += static_cast<int64_t>(b.size);
      blocks.append(block);
    }
    s["allocated_size"] = allocated;
    s["blocks"] = blocks;
    segments.append(s);
  }
  return segments;
}

py::dict Properties(int index) {
  const cuda::DeviceProperties p = Unwrap(cuda::GetDeviceProperties(index));
  py::dict d;
  d["index"] = p.index;
  d["name"] = p.name;
  d["major"] = p.cc_major;
  d["minor"] = p.cc_minor;
  d["total_memory"] = p.total_memory;
  d["multi_processor_count"] = p.multiprocessors;
  d["pci_bus_id"] = p.pci_bus_id;
  d["uuid"] = p.uuid;
  d["l2_cache_size"] = p.l2_cache_bytes;
  d["memory_pools"] = p.memory_pools;
  return d;
}

}  // namespace

void RegisterMemory(py::module_& m) {
  py::class_<Device> device = py::reinterpret_borrow<py::class_<Device>>(m.attr("Device"));
  device
      .def("memory_allocated",
           [](const Device& d) { return Pool(d)->Stats().all.allocated_bytes.current; },
           "Bytes in blocks handed out by the device's pool.")
      .def("memory_cached", [](const Device& d) { return Pool(d)->Stats().all.cached_bytes.current; },
           "Bytes the pool holds that nobody uses (reserved - allocated).")
      .def("memory_reserved",
           [](const Device& d) { return Pool(d)->Stats().all.reserved_bytes.current; },
           "Bytes the pool got from the device or the system.")
      .def("max_memory_allocated",
           [](const Device& d) { return Pool(d)->Stats().all.allocated_bytes.peak; })
      .def("max_memory_cached", [](const Device& d) { return Pool(d)->Stats().all.cached_bytes.peak; })
      .def("max_memory_reserved",
           [](const Device& d) { return Pool(d)->Stats().all.reserved_bytes.peak; })
      .def("memory_stats", [](const Device& d) { return StatsDict(Pool(d)->Stats()); },
           "The seeds' keys (allocated_bytes, cached_bytes, reserved_bytes, active_bytes, "
           "inactive_split_bytes, cache_hit_rate, num_allocations, num_cache_hits, "
           "num_cache_misses, peak_allocated, peak_cached, ...) and PyTorch's dotted keys.")
      .def("memory_summary", [](const Device& d) { return Pool(d)->Summary(); },
           "A table of the pool's memory, like torch.cuda.memory_summary().")
      .def("memory_snapshot", [](const Device& d) { return Snapshot(Pool(d)); },
           "The pool's segments and their blocks (torch.cuda.memory_snapshot's shape).")
      .def("empty_cache",
           [](const Device& d) {
             CachingAllocator* pool = Pool(d);
             WithoutGil([&] { return pool->EmptyCache(); });
           },
           "Returns the pool's unused segments to the device or the system.")
      .def("compact",
           [](const Device& d) {
             CachingAllocator* pool = Pool(d);
             WithoutGil([&] { return pool->Compact(); });
           },
           "Releases what the pool can of its free memory, splits included.")
      .def("reset_memory_stats",
           [](const Device& d) {
             CachingAllocator* pool = Pool(d);
             pool->ResetPeakStats();
             pool->ResetAccumulatedStats();
           },
           "Resets the peaks and the running totals.");

  m.def("pinned_memory_stats", [] { return StatsDict(Unwrap(memory::PinnedHostPool())->Stats()); },
        "memory_stats() of the pinned host pool (needs a GPU).");
  m.def(
      "set_alloc_config",
      [](const std::string& text) {
        memory::AllocConfig config = Unwrap(memory::DefaultAllocConfig());
        config = Unwrap(memory::ParseAllocConfig(text, config));
        ThrowIfError(memory::SetDefaultAllocConfig(config));
        return memory::FormatAllocConfig(config);
      },
      py::arg("conf"),
      "Settings (GENESIS_ALLOC_CONF's syntax, on top of the current ones) for pools not yet "
      "made; returns every setting. ValueError naming a key or value that does not parse; "
      "RuntimeError once a pool exists.");
  m.def("release_cached_memory", [] {
    WithoutGil([&] { return memory::ReleaseCachedMemory(); });
  }, "empty_cache() of every pool of the process.");

  py::module_ cuda = m.def_submodule("cuda", "CUDA devices as genesis sees them.");
  cuda.def("built_with_cuda", &cuda::BuiltWithCuda, "True if this build has CUDA code.");
  cuda.def("device_count", &cuda::DeviceCount, "Visible CUDA devices (0 without a GPU).");
  cuda.def("no_device_reason", &cuda::NoDeviceReason, "Why device_count() is 0.");
  cuda.def("get_device_properties", &Properties, py::arg("device"));
  cuda.def("mem_get_info", [](int device) {
    const cuda::MemoryInfo info = Unwrap(cuda::GetMemoryInfo(device));
    return py::make_tuple(info.free_bytes, info.total_bytes);
  }, py::arg("device"), "(free, total) bytes of the device.");
  cuda.def("synchronize", [](int device) {
    WithoutGil([&] { return cuda::SynchronizeDevice(device); });
  }, py::arg("device"), "Waits for all work queued on the device.");
  cuda.def("versions", [] {
    const cuda::Versions v = cuda::GetVersions();
    py::dict d;
    d["cuda_runtime"] = cuda::FormatCudaVersion(v.runtime);
    d["cuda_driver"] = cuda::FormatCudaVersion(v.driver);
    d["nccl"] = v.nccl;
    d["nccl_error"] = v.nccl_error;
    d["nccl_library"] = v.nccl_library;
    return d;
  }, "Versions of the CUDA runtime, the driver and NCCL found at run time.");
}

}  // namespace genesis::python
