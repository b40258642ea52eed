"""genesis.profiler.profile_memory(): record what the memory pools do inside a block.

    with genesis.profiler.profile_memory() as prof:
        x = genesis.rand(4096, 4096, device='cuda')
        del x
    print(prof.memory_summary())
    prof.export_chrome_trace('memory.json')          # chrome://tracing, Perfetto
    prof.export_memory_snapshot('memory.pickle')     # PyTorch's memory_viz
    prof.save_picture('memory.png')
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

from genesis import _genesis


class MemoryProfile:
    """A recording of every pool of the process; reports work while and after it runs."""

    def __init__(self, stacks: bool = False, stack_depth: int = 16,
                 ring_events: int = 1 << 16) -> None:
        self._recorder = _genesis._ProfileMemory(stacks=stacks, stack_depth=stack_depth,
                                                 ring_events=ring_events)

    @classmethod
    def _of(cls, recorder: "_genesis._ProfileMemory") -> "MemoryProfile":
        """The reports of a recording that something else started (the process-wide one
        of genesis.enable_memory_profiling)."""
        profile = cls.__new__(cls)
        profile._recorder = recorder
        return profile

    def __enter__(self) -> "MemoryProfile":
        self._recorder.start()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._recorder.stop()

    @property
    def running(self) -> bool:
        """True between entering and leaving the block."""
        return self._recorder.running

    def mark(self, name: str) -> None:
        """Marks this moment (a step, a phase) in the recording and its exports."""
        self._recorder.mark(name)

    def memory_summary(self) -> str:
        """A text report: per pool, peaks, allocation counts, the busiest sizes."""
        return self._recorder.summary_text()

    def summary(self) -> Dict[str, Any]:
        """The report of memory_summary() as a dict."""
        return json.loads(self._recorder.summary_json())

    def peak_memory(self, pool: Optional[str] = None) -> int:
        """The highest allocated bytes seen during the recording: of the pool named
        ``pool`` ('cpu', 'cuda:0', or a full label such as 'cpu/host'), or the largest of
        any pool."""
        pools = self.summary().get("pools", [])
        peaks = [p["peak_allocated"] for p in pools
                 if pool is None or p["pool"] == pool or p["pool"].startswith(pool + "/")]
        if pool is not None and not peaks:
            raise ValueError(f"no pool named {pool!r} in the recording "
                             f"({[p.get('pool') for p in pools]})")
        return max(peaks, default=0)

    def check_memory_leaks(self) -> Dict[str, Any]:
        """Allocations made during the recording and still held, by call site (with
        stacks=True the sites are named)."""
        return json.loads(self._recorder.leaks_json())

    def large_allocations(self, min_size: int = 1 << 20) -> List[Dict[str, Any]]:
        """Allocations of at least ``min_size`` bytes during the recording, largest
        first, freed or not."""
        return json.loads(self._recorder.large_allocations_json(min_size))

    def export_chrome_trace(self, path: str) -> None:
        """Writes the recording as a Chrome trace (JSON; Perfetto and chrome://tracing)."""
        self._recorder.write_chrome_trace(path)

    def export_memory_snapshot(self, path: str) -> None:
        """Writes a PyTorch memory snapshot (a pickle for .pickle/.pkl, else JSON) that
        PyTorch's memory_viz reads."""
        self._recorder.write_torch_snapshot(path)

    def export_replay_trace(self, path: str) -> None:
        """Writes the first pool's allocations as a trace genesis's replayer runs."""
        self._recorder.write_replay_trace(path)

    def save_picture(self, path: str, width: int = 1200, height: int = 800,
                     title: str = "Memory profile") -> None:
        """Draws allocated and reserved memory over time (needs matplotlib)."""
        self._recorder.write_picture(path, width, height, title)


def profile_memory(stacks: bool = False, stack_depth: int = 16,
                   ring_events: int = 1 << 16) -> MemoryProfile:
    """A context manager recording every pool's allocations inside its block;
    ``stacks=True`` also records call stacks (slower) so reports name call sites."""
    return MemoryProfile(stacks=stacks, stack_depth=stack_depth, ring_events=ring_events)
