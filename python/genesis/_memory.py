"""Process-wide memory statistics and the leak check (genesis.memory_stats() and kin)."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

import genesis
from genesis import _genesis


class MemoryStats(dict):
    """A pool's statistics: a dict (``stats['allocated_bytes']``) whose keys also read as
    attributes (``stats.allocated_bytes``); ``fragmentation_ratio()`` is also a method,
    as the documents call it."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def fragmentation_ratio(self) -> float:  # type: ignore[override]
        """1 - largest free block / cached bytes: near 1 when the cache is scattered."""
        return float(self["fragmentation_ratio"])


def memory_stats(device: Optional[Any] = None) -> MemoryStats:
    """The statistics of ``device``'s pool (default: cuda:0 with a GPU, else the CPU)."""
    return MemoryStats(genesis._optional_device(device).memory_stats())


def empty_cache(device: Optional[Any] = None) -> None:
    """Returns unused cached memory to the system: of ``device``'s pool, or of every pool
    of the process when ``device`` is None."""
    if device is None:
        _genesis.release_cached_memory()
    else:
        genesis.device(device).empty_cache()


class DetailedMemoryStats:
    """Totals of one pool and the large allocations it holds now."""

    def __init__(self, device: _genesis.Device) -> None:
        self.device = device
        stats = device.memory_stats()
        self.stats = MemoryStats(stats)
        self.total_allocated: int = stats["allocated_bytes"]
        self.total_reserved: int = stats["reserved_bytes"]
        self.total_cached: int = stats["cached_bytes"]
        self.peak_allocated: int = stats["peak_allocated"]
        self.peak_cached: int = stats["peak_cached"]
        self.fragmentation_ratio: float = stats["fragmentation_ratio"]
        self.cache_hit_rate: float = stats["cache_hit_rate"]
        self.num_allocations: int = stats["num_allocations"]

    def get_large_allocations(self, min_size: int = 1 << 20) -> List[Dict[str, Any]]:
        """Live blocks of at least ``min_size`` bytes, largest first: address, size,
        requested size, and (while profiling with stacks) the call site."""
        if _profiling is not None:
            found = json.loads(_profiling.large_allocations_json(min_size))
            return [a for a in found if not a.get("freed", False)]
        blocks = [
            {"address": b["address"], "size": b["size"], "requested": b["requested_size"]}
            for segment in self.device.memory_snapshot()
            for b in segment["blocks"]
            if b["state"] == "active_allocated" and b["size"] >= min_size
        ]
        return sorted(blocks, key=lambda b: -b["size"])


def detailed_memory_stats(device: Optional[Any] = None) -> DetailedMemoryStats:
    """Totals, peaks, fragmentation and hit rate of ``device``'s pool (default as for
    memory_stats), with ``get_large_allocations(min_size=...)``."""
    return DetailedMemoryStats(genesis._optional_device(device))


# The process's recording, while enable_memory_profiling(True) holds.
_profiling: Optional[_genesis._ProfileMemory] = None


def enable_memory_profiling(enabled: bool = True, stacks: bool = True) -> None:
    """Starts (or, with False, stops) recording every pool's allocations, with call
    stacks by default, so that check_memory_leaks() can name where leaked memory came
    from. Recording continues until it is turned off."""
    global _profiling
    if enabled and _profiling is None:
        recorder = _genesis._ProfileMemory(stacks=stacks)
        recorder.start()
        _profiling = recorder
    elif not enabled and _profiling is not None:
        _profiling.stop()
        _profiling = None


def set_memory_debug(enabled: bool = True) -> None:
    """enable_memory_profiling(enabled) with call stacks: the documents' other name."""
    enable_memory_profiling(enabled, stacks=True)


enable_memory_debugging = set_memory_debug


class Leak:
    """Memory allocated while profiling and still held: where, how much, how often."""

    def __init__(self, site: Dict[str, Any]) -> None:
        self.location: str = site.get("site", "")
        self.size: int = int(site.get("bytes", 0))
        self.count: int = int(site.get("count", 0))
        self.details = site

    def __repr__(self) -> str:
        return f"Leak({self.size} bytes in {self.count} blocks at {self.location!r})"


def check_memory_leaks() -> List[Leak]:
    """The allocations made since enable_memory_profiling(True) and not freed, grouped by
    call site, largest first; empty when nothing leaked. RuntimeError if profiling is
    off (nothing was recorded to check)."""
    if _profiling is None:
        raise RuntimeError("check_memory_leaks() needs genesis.enable_memory_profiling(True) "
                           "before the code to check")
    report = json.loads(_profiling.leaks_json())
    return [Leak(site) for site in report.get("sites", [])]
