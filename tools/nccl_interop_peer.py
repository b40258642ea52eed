#!/usr/bin/env python3
"""The other NCCL client beside a genesis rank: CuPy's NCCL binding.

Rank 0 makes the unique id with CuPy and writes its 128 bytes as hex to --id_file; every
rank then joins the communicator and runs the all_reduce and broadcast that
genesis/distributed/examples/join_nccl_id.cc runs on the genesis side, checking each
value. The genesis ranks must load the NCCL that CuPy loads (the wheel's
nvidia/nccl/lib): --print_nccl_lib prints that directory for LD_LIBRARY_PATH.

    python3 nccl_interop_peer.py --rank=0 --size=2 --device=0 --id_file=/tmp/id &
    LD_LIBRARY_PATH=$(python3 nccl_interop_peer.py --print_nccl_lib) \\
        join_nccl_id --rank=1 --size=2 --device=1 --id_file=/tmp/id

Prints one line and exits non-zero if anything was wrong.
"""

import argparse
import os
import sys
import time


def nccl_lib_dir() -> str:
    """The directory of the NCCL library the installed wheels bring (nvidia.nccl)."""
    import nvidia.nccl  # noqa: PLC0415 (imported only when asked for)

    return os.path.join(list(nvidia.nccl.__path__)[0], "lib")


def write_id(path: str, uid) -> None:
    """Writes `uid` (CuPy's 128 bytes, or older CuPy's tuple of signed bytes) as 256 hex
    digits, atomically."""
    text = bytes(v & 0xFF for v in uid).hex()
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="ascii") as f:
        f.write(text + "\n")
    os.replace(tmp, path)


def read_id(path: str, timeout_s: float) -> bytes:
    """Waits for `path` and returns the id's 128 bytes."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with open(path, encoding="ascii") as f:
                text = f.read().strip()
            if len(text) == 256:
                return bytes.fromhex(text)
        except FileNotFoundError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"no unique id in {path} within {timeout_s} s")
        time.sleep(0.02)


def communicator(nccl, size: int, uid, rank: int):
    """CuPy's NcclCommunicator from `uid`: CuPy 13 and later take the id as bytes, older
    CuPy as a tuple of signed bytes (the constructor checks the type before any NCCL
    call, so trying one and then the other is safe)."""
    try:
        return nccl.NcclCommunicator(size, bytes(v & 0xFF for v in uid), rank)
    except TypeError:
        return nccl.NcclCommunicator(size, tuple(b - 256 if b > 127 else b for b in
                                                 bytes(v & 0xFF for v in uid)), rank)


def run(args: argparse.Namespace) -> str:
    """Joins the communicator and checks the two operations; returns '' or the error."""
    import cupy  # noqa: PLC0415
    from cupy.cuda import nccl  # noqa: PLC0415

    if args.rank == 0:
        uid = nccl.get_unique_id()
        write_id(args.id_file, uid)
    else:
        uid = read_id(args.id_file, args.timeout_s)
    with cupy.cuda.Device(args.device):
        comm = communicator(nccl, args.size, uid, args.rank)
        stream = cupy.cuda.Stream(non_blocking=True)
        x = cupy.full(args.count, args.rank + 1, dtype=cupy.float32)
        comm.allReduce(x.data.ptr, x.data.ptr, args.count, nccl.NCCL_FLOAT32, nccl.NCCL_SUM,
                       stream.ptr)
        y = cupy.full(args.count, 7 if args.rank == 0 else 0, dtype=cupy.float32)
        comm.bcast(y.data.ptr, args.count, nccl.NCCL_FLOAT32, 0, stream.ptr)
        stream.synchronize()
        want = args.size * (args.size + 1) / 2
        if not bool((x == want).all()):
            return f"all_reduce gave {float(x[0])}, not {want}"
        if not bool((y == 7).all()):
            return f"broadcast gave {float(y[0])}, not 7"
        comm.destroy()
    return ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rank", type=int, default=0)
    parser.add_argument("--size", type=int, default=2)
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--id_file", default="")
    parser.add_argument("--count", type=int, default=1 << 20)
    parser.add_argument("--timeout_s", type=float, default=60)
    parser.add_argument("--print_nccl_lib", action="store_true",
                        help="print the wheels' NCCL directory and exit")
    args = parser.parse_args()
    if args.print_nccl_lib:
        print(nccl_lib_dir())
        return 0
    from cupy.cuda import nccl  # noqa: PLC0415

    error = run(args)
    version = nccl.get_version()
    print(f"cupy rank {args.rank} (NCCL {version // 10000}.{version // 100 % 100}."
          f"{version % 100}): {error or 'all_reduce and broadcast ok'}")
    return 1 if error else 0


if __name__ == "__main__":
    sys.exit(main())
