"""genesis: caching memory pools, storages and their copies, from Python.

The package wraps genesis's C++ layer (the extension module ``genesis._genesis``):

    import genesis
    x = genesis.zeros(1024, 1024, dtype=genesis.float32, device='cuda')
    y = x.to(genesis.bfloat16).to('cpu')
    print(genesis.device('cuda').memory_stats()['cache_hit_rate'])

Storages exchange memory with NumPy, PyTorch and CuPy through DLPack without a copy
(``numpy.from_dlpack(s)``, ``torch.from_dlpack(s)``, ``genesis.from_dlpack(t)``).
Errors are Python exceptions carrying genesis's message: ``genesis.OutOfMemoryError`` (a
``MemoryError``) when a pool cannot serve, ``ValueError`` for bad arguments.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Union

from genesis import _genesis
from genesis._genesis import (  # noqa: F401  (re-exported)
    BatchStorage,
    Device,
    PendingCopy,
    OutOfMemoryError,
    Storage,
    arange,
    batch_copy,
    copy_storage,
    copy_storage_async,
    create_storage,
    dtype,
    empty,
    from_dlpack,
    full,
    host_copy_threads,
    manual_seed,
    ones,
    pinned_memory_stats,
    plan_batch_copy,
    rand,
    randint,
    randn,
    set_host_copy_threads,
    zeros,
)
from genesis._genesis import (  # noqa: F401  (the dtypes)
    bfloat16,
    float16,
    float32,
    float64,
    int8,
    int16,
    int32,
    int64,
    uint8,
)
from genesis import cuda, distributed, memory_manager, memory_profiler, profiler  # noqa: F401,E402
from genesis._memory import (  # noqa: F401,E402
    DetailedMemoryStats,
    MemoryStats,
    check_memory_leaks,
    detailed_memory_stats,
    empty_cache,
    enable_memory_debugging,
    enable_memory_profiling,
    memory_stats,
    set_memory_debug,
)

bool = _genesis.bool  # noqa: A001  (genesis.bool, as torch.bool)
half = float16
double = float64
long = int64

__version__ = "0.1.0"

DeviceLike = Union[Device, str, None]


def device(spec: DeviceLike = "cpu") -> Device:
    """Returns the device named by ``spec``: 'cpu', 'cuda' (cuda:0) or 'cuda:N'.

    Whether a CUDA device exists is checked when memory is drawn from it (its pool),
    so ``genesis.device('cuda:7')`` itself never fails on a parseable name. Raises
    ValueError naming ``spec`` when it does not parse.
    """
    if isinstance(spec, Device):
        return spec
    return Device(spec)


def tensor(data: Any, device: DeviceLike = None, dtype: Any = None) -> Storage:
    """``create_storage(data, device, dtype)``: a copy of ``data`` as a storage."""
    return create_storage(data, device, dtype)


def info() -> Dict[str, Any]:
    """What this genesis sees: its version, CUDA and NCCL versions, visible GPUs."""
    result: Dict[str, Any] = {"version": __version__,
                              "built_with_cuda": cuda.built_with_cuda(),
                              "device_count": cuda.device_count()}
    result.update(_genesis.cuda.versions())
    if result["device_count"] == 0:
        result["no_device_reason"] = _genesis.cuda.no_device_reason()
    return result


def _optional_device(spec: Optional[DeviceLike]) -> Device:
    return device(spec) if spec is not None else default_device()


def default_device() -> Device:
    """cuda:0 when a GPU is visible, else the CPU."""
    return Device("cuda:0") if cuda.is_available() else Device("cpu")
