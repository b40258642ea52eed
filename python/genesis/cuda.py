"""genesis.cuda: the GPUs as genesis sees them, and their pools' statistics.

Every function taking ``device`` accepts an index, 'cuda:N' or a genesis.Device, and
defaults to cuda:0. Without a GPU, is_available() is False and the others raise
ValueError or RuntimeError saying why no device is visible.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple, Union

from genesis import _genesis

built_with_cuda = _genesis.cuda.built_with_cuda
device_count = _genesis.cuda.device_count
versions = _genesis.cuda.versions

DeviceArg = Union[int, str, _genesis.Device, None]


def is_available() -> bool:
    """True if genesis was built with CUDA and at least one GPU is visible."""
    return _genesis.cuda.device_count() > 0


def _device(device: DeviceArg) -> _genesis.Device:
    if device is None:
        device = 0
    if isinstance(device, int):
        device = f"cuda:{device}"
    d = device if isinstance(device, _genesis.Device) else _genesis.Device(device)
    if not d.is_cuda:
        raise ValueError(f"not a CUDA device: {device!r}")
    return d


def memory_allocated(device: DeviceArg = None) -> int:
    """Bytes handed out by the device's pool."""
    return _device(device).memory_allocated()


def memory_cached(device: DeviceArg = None) -> int:
    """Bytes the device's pool holds unused."""
    return _device(device).memory_cached()


def memory_reserved(device: DeviceArg = None) -> int:
    """Bytes the device's pool got from the GPU."""
    return _device(device).memory_reserved()


def max_memory_allocated(device: DeviceArg = None) -> int:
    """The peak of memory_allocated() since the last reset_memory_stats()."""
    return _device(device).max_memory_allocated()


def memory_stats(device: DeviceArg = None) -> Dict[str, Any]:
    """The device pool's statistics (see genesis.Device.memory_stats)."""
    return _device(device).memory_stats()


def memory_summary(device: DeviceArg = None) -> str:
    """A table of the device pool's memory."""
    return _device(device).memory_summary()


def memory_snapshot(device: DeviceArg = None) -> List[Dict[str, Any]]:
    """The device pool's segments, each with its blocks."""
    return _device(device).memory_snapshot()


def empty_cache(device: DeviceArg = None) -> None:
    """Returns the unused memory of the device's pool (of every GPU when None) to
    the GPU."""
    if device is None:
        for i in range(device_count()):
            _device(i).empty_cache()
    else:
        _device(device).empty_cache()


def reset_memory_stats(device: DeviceArg = None) -> None:
    """Resets the device pool's peaks and running totals."""
    _device(device).reset_memory_stats()


def synchronize(device: DeviceArg = None) -> None:
    """Waits for all work queued on the device (releasing the GIL meanwhile)."""
    _genesis.cuda.synchronize(_device(device).index)


def get_device_properties(device: DeviceArg = None) -> Dict[str, Any]:
    """Name, compute capability, memory and PCI identity of the device."""
    return _genesis.cuda.get_device_properties(_device(device).index)


def get_device_name(device: DeviceArg = None) -> str:
    """E.g. 'NVIDIA H200'."""
    return get_device_properties(device)["name"]


def get_device_capability(device: DeviceArg = None) -> Tuple[int, int]:
    """The compute capability, e.g. (9, 0)."""
    p = get_device_properties(device)
    return (p["major"], p["minor"])


def mem_get_info(device: DeviceArg = None) -> Tuple[int, int]:
    """(free, total) bytes of the device, as the driver reports them."""
    return _genesis.cuda.mem_get_info(_device(device).index)


def set_memory_fraction(fraction: float) -> str:
    """Pools made from now on reserve at most ``fraction`` of their GPU. Pools take
    their settings when made: RuntimeError once one exists (call it first, or set
    GENESIS_ALLOC_CONF); ValueError outside (0, 1]. Returns every setting."""
    return _genesis.set_alloc_config(f"memory_fraction:{fraction!r}")


def set_cache_size(size: Union[int, str]) -> str:
    """Pools made from now on keep at most ``size`` bytes cached ("2GB", "512MiB", a
    number of bytes, or "none"). Errors as for set_memory_fraction."""
    return _genesis.set_alloc_config(f"cache_limit:{size}")


def no_device_reason() -> Optional[str]:
    """Why no GPU is visible, or None when one is."""
    return None if is_available() else _genesis.cuda.no_device_reason()
