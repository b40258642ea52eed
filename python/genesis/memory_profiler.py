"""genesis.memory_profiler: the documents' recording API over genesis.profiler.

    with genesis.memory_profiler.record():
        model = create_model()
        output = model(data)
    print(genesis.memory_profiler.get_report().summary())
    genesis.memory_profiler.get_timeline().plot("memory.png")

Or, after genesis.enable_memory_profiling(True), get_report() reads the process-wide
recording so far.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Optional

from genesis import _memory
from genesis.profiler import MemoryProfile

_last: Optional[MemoryProfile] = None


@contextmanager
def record(stacks: bool = False) -> Iterator[MemoryProfile]:
    """Records every pool's allocations inside the block; get_report() and
    get_timeline() then read this recording."""
    global _last
    profile = MemoryProfile(stacks=stacks)
    with profile:
        _last = profile
        yield profile


class Report:
    """A recording's reports: summary() as text, the rest as in genesis.profiler."""

    def __init__(self, profile: MemoryProfile) -> None:
        self.profile = profile

    def summary(self) -> str:
        """Per pool: peaks, allocation counts, the busiest sizes."""
        return self.profile.memory_summary()

    def peak_memory(self) -> int:
        """The highest allocated bytes of any pool during the recording."""
        return self.profile.peak_memory()

    def leaks(self):
        """Allocations of the recording still held, by call site."""
        return self.profile.check_memory_leaks()


class Timeline:
    """Allocated and reserved memory over the recording's time."""

    def __init__(self, profile: MemoryProfile) -> None:
        self.profile = profile

    def plot(self, path: str = "memory_timeline.png") -> str:
        """Draws the timeline into ``path`` (PNG, needs matplotlib); returns the path."""
        self.profile.save_picture(path)
        return path

    def export_chrome_trace(self, path: str) -> None:
        """The same as a Chrome trace (Perfetto, chrome://tracing)."""
        self.profile.export_chrome_trace(path)


def _current() -> MemoryProfile:
    if _last is not None:
        return _last
    recording = _memory._profiling
    if recording is not None:
        return MemoryProfile._of(recording)
    raise RuntimeError("nothing recorded: use `with genesis.memory_profiler.record():` or "
                       "genesis.enable_memory_profiling(True) first")


def get_report() -> Report:
    """The reports of the last record() block, or of enable_memory_profiling's recording."""
    return Report(_current())


def get_timeline() -> Timeline:
    """The timeline of the last record() block, or of enable_memory_profiling's recording."""
    return Timeline(_current())
