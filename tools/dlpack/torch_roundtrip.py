#!/usr/bin/env python3
"""DLPack round trip between genesis storages and PyTorch, through genesis's C ABI.

  python3 tools/dlpack/torch_roundtrip.py path/to/libgenesis_dlpack_c.so [--device cuda:0]

Checks, printing one line each and exiting non-zero on the first failure:
  * a genesis storage handed to torch.from_dlpack: same pointer, same values, and writes
    by genesis are seen by PyTorch (zero-copy), for float32 and bfloat16;
  * PyTorch tensors (strided, several dtypes) handed to genesis: same pointer, same
    values (read through a genesis conversion), genesis writes seen by PyTorch;
  * an unsupported dtype (complex64) refused with a message that names it.
Needs PyTorch; uses the GPU given by --device (a CPU run checks the host path).
"""
import argparse
import ctypes
import sys

import torch
import torch.utils.dlpack

# Capsule names, kept alive for as long as the capsules that point at them.
DLTENSOR = b"dltensor"
USED_DLTENSOR = b"used_dltensor"

_new_capsule = ctypes.pythonapi.PyCapsule_New
_new_capsule.restype = ctypes.py_object
_new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_set_name = ctypes.pythonapi.PyCapsule_SetName
_capsule_set_name.restype = ctypes.c_int
_capsule_set_name.argtypes = [ctypes.py_object, ctypes.c_char_p]


class Genesis:
  """The C ABI of tools/dlpack/genesis_dlpack_c.h."""

  def __init__(self, path):
    lib = ctypes.CDLL(path)
    p = ctypes.c_void_p
    lib.genesis_last_error.restype = ctypes.c_char_p
    lib.genesis_arange.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_double,
                                   ctypes.c_double, ctypes.c_double, ctypes.POINTER(p)]
    lib.genesis_from_dlpack.argtypes = [p, ctypes.POINTER(p)]
    lib.genesis_to_dlpack.argtypes = [p, ctypes.POINTER(p)]
    lib.genesis_data_ptr.argtypes = [p]
    lib.genesis_data_ptr.restype = p
    lib.genesis_numel.argtypes = [p]
    lib.genesis_numel.restype = ctypes.c_int64
    lib.genesis_describe.argtypes = [p]
    lib.genesis_describe.restype = ctypes.c_char_p
    lib.genesis_to_float64.argtypes = [p, ctypes.POINTER(ctypes.c_double), ctypes.c_int64]
    lib.genesis_fill.argtypes = [p, ctypes.c_double]
    lib.genesis_storage_free.argtypes = [p]
    self.lib = lib

  def check(self, rc, what):
    if rc != 0:
      raise RuntimeError(f"{what}: {self.lib.genesis_last_error().decode()}")

  def arange(self, device, dtype, start, stop, step=1.0):
    out = ctypes.c_void_p()
    self.check(self.lib.genesis_arange(device.encode(), dtype.encode(), start, stop, step,
                                       ctypes.byref(out)), "genesis_arange")
    return out

  def to_torch(self, storage):
    managed = ctypes.c_void_p()
    self.check(self.lib.genesis_to_dlpack(storage, ctypes.byref(managed)), "genesis_to_dlpack")
    return torch.utils.dlpack.from_dlpack(_new_capsule(managed, DLTENSOR, None))

  def from_torch(self, tensor):
    capsule = torch.utils.dlpack.to_dlpack(tensor)
    managed = _capsule_pointer(capsule, DLTENSOR)
    _capsule_set_name(capsule, USED_DLTENSOR)  # genesis owns it now
    out = ctypes.c_void_p()
    rc = self.lib.genesis_from_dlpack(managed, ctypes.byref(out))
    return rc, out

  def values(self, storage):
    n = self.lib.genesis_numel(storage)
    buf = (ctypes.c_double * n)()
    self.check(self.lib.genesis_to_float64(storage, buf, n), "genesis_to_float64")
    return torch.tensor(list(buf), dtype=torch.float64)

  def fill(self, storage, value):
    self.check(self.lib.genesis_fill(storage, value), "genesis_fill")


def expect(condition, message):
  print(("PASS " if condition else "FAIL ") + message, flush=True)
  if not condition:
    sys.exit(1)


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("library")
  parser.add_argument("--device", default="cuda:0" if torch.cuda.is_available() else "cpu")
  args = parser.parse_args()
  g = Genesis(args.library)
  device = args.device
  print(f"torch {torch.__version__}, device {device}")

  # genesis -> PyTorch.
  for dtype, torch_dtype in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
    s = g.arange(device, dtype, 0, 1000)
    t = g.to_torch(s)
    ptr = g.lib.genesis_data_ptr(s)
    expect(t.data_ptr() == ptr and str(t.device) == device and t.dtype == torch_dtype,
           f"genesis {g.lib.genesis_describe(s).decode()} -> torch {t.dtype} {t.device}: "
           f"pointer {t.data_ptr():#x} == {ptr:#x}")
    want = torch.arange(1000, dtype=torch.float64, device=device).to(torch_dtype)
    expect(torch.equal(t, want), f"  values equal torch.arange(1000).to({torch_dtype})")
    g.fill(s, 5)
    expect(bool((t == 5).all()), "  genesis fill seen by torch (shared memory)")
    g.lib.genesis_storage_free(s)
    expect(float(t.float().sum()) == 5000, "  torch keeps the memory after genesis lets go")
    del t

  # PyTorch -> genesis.
  base = torch.randn(64, 48, device=device)
  cases = [
      ("transposed float32", base.t()),
      ("sliced bfloat16", base.to(torch.bfloat16)[::2, 3:40:3]),
      ("float16", base.to(torch.float16)),
      ("int64", torch.arange(-50, 50, device=device)),
      ("bool", base > 0),
      ("uint8 3-d", torch.arange(60, device=device).to(torch.uint8).reshape(3, 4, 5).permute(2, 0, 1)),
  ]
  for name, tensor in cases:
    rc, s = g.from_torch(tensor)
    g.check(rc, f"genesis_from_dlpack({name})")
    ptr = g.lib.genesis_data_ptr(s)
    expect(ptr == tensor.data_ptr(),
           f"torch {name} {tuple(tensor.shape)} strides {tensor.stride()} -> genesis "
           f"{g.lib.genesis_describe(s).decode()}: pointer {ptr:#x} == {tensor.data_ptr():#x}")
    got = g.values(s)
    want = tensor.to(torch.float64).flatten().cpu()
    expect(torch.equal(got, want), f"  values equal ({got.numel()} elements)")
    g.fill(s, 1)
    expect(bool((tensor == 1).all()), "  genesis fill seen by torch")
    g.lib.genesis_storage_free(s)

  rc, _ = g.from_torch(torch.zeros(4, dtype=torch.complex64, device=device))
  message = g.lib.genesis_last_error().decode()
  expect(rc != 0 and "code 5" in message,
         f"complex64 refused: {message}")
  print("dlpack round trip: all checks passed")


if __name__ == "__main__":
  main()
