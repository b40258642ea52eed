"""The pools' settings when genesis serves PyTorch (genesis.torch), kept apart from it so
that they load, and are tested, without PyTorch."""

from __future__ import annotations

import os
from typing import Optional

from genesis import _genesis

# The pools' settings under PyTorch, unless GENESIS_ALLOC_CONF says otherwise: pieces of
# 16 MiB joined from 2 MiB (PyTorch's steps map and release memory in small steps), and
# thread caches of 8 MiB (backward frees on PyTorch's autograd thread what the main
# thread allocated; larger caches hold that memory where the main thread cannot reuse
# it). On one H200 these took peak reserved / peak allocated to 1.015-1.024 on GPT-2
# (fixed and random lengths) and 1.018 on ResNet-50 (docs/python.md).
TORCH_DEFAULT_CONF = ("expandable_piece_size:16MiB,expandable_min_piece:2MiB,"
                      "thread_cache_bytes:8MiB")


def set_torch_config(conf: Optional[str]) -> str:
    """Sets the settings of pools not yet made for PyTorch: TORCH_DEFAULT_CONF unless
    GENESIS_ALLOC_CONF is set, then ``conf`` on top. Returns every setting. ValueError
    naming a key or value of ``conf`` that does not parse; RuntimeError once a pool
    exists."""
    if not os.environ.get("GENESIS_ALLOC_CONF"):
        _genesis.set_alloc_config(TORCH_DEFAULT_CONF)
    return _genesis.set_alloc_config(conf or "")
