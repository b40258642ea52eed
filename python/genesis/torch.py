"""genesis.torch: genesis's device pools as PyTorch's CUDA allocator, in one line.

    import genesis.torch
    genesis.torch.use_as_allocator()          # before anything starts CUDA
    model = build_model().cuda()              # PyTorch's tensors now come from genesis
    print(genesis.torch.memory_summary())     # what torch.cuda.memory_summary() was

Or only for one region of a program, keeping PyTorch's allocator elsewhere:

    with torch.cuda.use_mem_pool(genesis.torch.mem_pool()):
        buffers = torch.empty(...)             # drawn from genesis's pool

Installed, PyTorch's own statistics (torch.cuda.memory_stats and friends, snapshots,
_record_memory_history) say "not supported"; genesis reports instead
(genesis.torch.memory_stats(), memory_summary(), and genesis.profiler's snapshot
pickle, which PyTorch's memory_viz reads). torch.cuda.empty_cache() reaches genesis's
pools, record_stream is honoured by their stream ordering, and running out of memory
raises a RuntimeError carrying genesis's report of the pool (PyTorch gives a pluggable
allocator no way to raise torch.OutOfMemoryError).
"""

from __future__ import annotations

import ctypes
from typing import Any, Dict, List, Optional, Tuple

import torch

from genesis import _genesis
from genesis._torch_settings import (  # noqa: F401 (TORCH_DEFAULT_CONF: part of the API)
    TORCH_DEFAULT_CONF, set_torch_config)

# PyTorch's hooks of a pluggable allocator and the functions of genesis._genesis that
# serve them (python/src/torch_allocator.h).
_HOOKS = [("set_record_stream_fn", "genesis_torch_record_stream"),
          ("set_reset_fn", "genesis_torch_empty_cache"),
          ("set_memory_fraction_fn", "genesis_torch_set_memory_fraction")]

_library: Optional[ctypes.CDLL] = None
_installed: Optional[Any] = None
_hooks_installed: List[str] = []


def _lib() -> ctypes.CDLL:
    global _library
    if _library is None:
        # The extension module itself: PyTorch's allocations and genesis's storages
        # share its pools.
        _library = ctypes.CDLL(_genesis.__file__)
        _library.genesis_torch_error_count.restype = ctypes.c_int64
        _library.genesis_torch_last_error.restype = ctypes.c_char_p
    return _library


def _pointer(name: str) -> int:
    return ctypes.cast(getattr(_lib(), name), ctypes.c_void_p).value


def _pluggable() -> Any:
    allocator = torch.cuda.memory.CUDAPluggableAllocator(
        _genesis.__file__, "genesis_torch_malloc", "genesis_torch_free")
    native = allocator.allocator()
    installed = []
    for setter, function in _HOOKS:
        set_fn = getattr(native, setter, None)
        if callable(set_fn):
            set_fn(_pointer(function))
            installed.append(setter)
    return allocator, installed


def use_as_allocator(conf: Optional[str] = None) -> List[str]:
    """Makes genesis's device pools PyTorch's CUDA allocator for the rest of the process.

    The pools take TORCH_DEFAULT_CONF first, unless GENESIS_ALLOC_CONF is set (then
    theirs), and ``conf`` on top (GENESIS_ALLOC_CONF's syntax, e.g.
    'memory_fraction:0.9'); ValueError if it does not parse. Must come before CUDA is
    initialised: RuntimeError otherwise (PyTorch's allocator is fixed from then on).
    Returns the PyTorch hooks installed (record_stream, empty_cache, memory fraction);
    calling it again returns them without change.
    """
    global _installed, _hooks_installed
    if _installed is not None:
        return list(_hooks_installed)
    if torch.cuda.is_initialized():
        raise RuntimeError(
            "genesis.torch.use_as_allocator() must come before CUDA is initialised "
            "(before the first CUDA tensor or CUDA call of this process): PyTorch's "
            "allocator cannot change after that")
    set_torch_config(conf)
    allocator, hooks = _pluggable()
    torch.cuda.memory.change_current_allocator(allocator)
    _installed, _hooks_installed = allocator, hooks
    return list(hooks)


def is_installed() -> bool:
    """True once use_as_allocator() has made genesis PyTorch's allocator."""
    return _installed is not None


def mem_pool() -> "torch.cuda.MemPool":
    """A torch.cuda.MemPool whose segments come from genesis's pool of the current
    device: inside ``torch.cuda.use_mem_pool(pool)``, PyTorch draws memory from genesis
    (for instance communication buffers that must lie in genesis's memory)."""
    allocator, _ = _pluggable()
    return torch.cuda.MemPool(allocator.allocator())


def _device(device: Any) -> _genesis.Device:
    if device is None:
        device = torch.cuda.current_device() if torch.cuda.is_initialized() else 0
    if isinstance(device, torch.device):
        device = device.index or 0
    if isinstance(device, int):
        device = f"cuda:{device}"
    return _genesis.Device(device)


def memory_stats(device: Any = None) -> Dict[str, Any]:
    """The statistics of genesis's pool of ``device`` (default: the current device),
    with PyTorch's dotted keys ("allocated_bytes.all.peak", ...) and genesis's."""
    return _device(device).memory_stats()


def memory_summary(device: Any = None) -> str:
    """A table of genesis's pool of ``device``, as torch.cuda.memory_summary() gives."""
    return _device(device).memory_summary()


def max_memory_reserved(device: Any = None) -> int:
    """Peak bytes genesis's pool of ``device`` got from the GPU."""
    return _device(device).max_memory_reserved()


def max_memory_allocated(device: Any = None) -> int:
    """Peak bytes genesis's pool of ``device`` handed out."""
    return _device(device).max_memory_allocated()


def reset_peak_memory_stats(device: Any = None) -> None:
    """Resets the peaks and running totals of genesis's pool of ``device``."""
    _device(device).reset_memory_stats()


def errors() -> Tuple[int, str]:
    """Errors PyTorch's free and record_stream calls met (they cannot raise): how many,
    and the last one's message."""
    lib = _lib()
    return int(lib.genesis_torch_error_count()), lib.genesis_torch_last_error().decode()
