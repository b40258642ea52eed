"""genesis.memory_manager: process-wide clean-up of the pools."""

from __future__ import annotations

import gc

from genesis import _genesis
from genesis import cuda


def _devices():
    yield _genesis.Device("cpu")
    for i in range(cuda.device_count()):
        yield _genesis.Device(f"cuda:{i}")


def collect_garbage() -> None:
    """Runs Python's garbage collector (so storages held only by reference cycles go
    back to their pools), then returns every pool's unused memory to the system."""
    gc.collect()
    _genesis.release_cached_memory()


def compact() -> None:
    """Releases what each pool can of its free memory, including free pieces of
    segments that are partly in use."""
    for device in _devices():
        device.compact()
