#!/usr/bin/env python3
"""Packs the genesis Python package, as Bazel built it, into a wheel.

    bazel run -c opt //python:build_wheel -- --out_dir=$PWD/dist
    pip install dist/genesis-*.whl          # then `import genesis` works anywhere

The wheel holds genesis/*.py, the extension module genesis/_genesis.so and the shared
abseil and Highway libraries it links (found with ldd and put beside it, where its rpath
$ORIGIN finds them), so it installs on machines without them. Its tag is that of the Python
running this script (the one the extension was built for) unless --python_tag says
another (an extension built with GENESIS_PYTHON_INCLUDE for another Python).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from typing import List, Optional

from wheel.wheelfile import WheelFile

NAME = "genesis"
VERSION = "0.1.0"
SUMMARY = "Caching memory pools, tensor storages and fast copies for GPU, pinned and CPU memory"


def package_dir() -> str:
    """The genesis package in this binary's runfiles (or next to this file)."""
    here = os.path.dirname(os.path.abspath(__file__))
    for candidate in [os.path.join(here, "genesis")] + [
            os.path.join(p, "genesis") for p in sys.path]:
        if os.path.exists(os.path.join(candidate, "_genesis.so")):
            return candidate
    raise SystemExit("build_wheel: genesis/_genesis.so not found (run it with bazel run)")


def linked_system_libraries(library: str) -> List[str]:
    """The shared libraries of Debian's abseil and Highway that `library` loads, as ldd
    resolves them (machines without them get them from the wheel)."""
    out = subprocess.run(["ldd", library], check=True, capture_output=True, text=True).stdout
    found = re.findall(r"^\s*((?:libabsl_|libhwy)\S+) => (\S+)", out, flags=re.M)
    missing = re.findall(r"^\s*(\S+) => not found", out, flags=re.M)
    if missing:
        raise SystemExit(f"build_wheel: {library} needs {missing}, which ldd cannot find")
    return [path for _, path in found]


def platform_tag() -> str:
    return sysconfig.get_platform().replace("-", "_").replace(".", "_")


def build(out_dir: str, python_tag: Optional[str]) -> str:
    tag = python_tag or f"cp{sys.version_info.major}{sys.version_info.minor}"
    source = package_dir()
    os.makedirs(out_dir, exist_ok=True)
    wheel_path = os.path.join(out_dir, f"{NAME}-{VERSION}-{tag}-{tag}-{platform_tag()}.whl")
    dist_info = f"{NAME}-{VERSION}.dist-info"
    with tempfile.TemporaryDirectory() as staging:
        pkg = os.path.join(staging, NAME)
        os.makedirs(pkg)
        for entry in sorted(os.listdir(source)):
            if entry.endswith(".py") or entry == "_genesis.so":
                shutil.copyfile(os.path.join(source, entry), os.path.join(pkg, entry))
        for library in linked_system_libraries(os.path.join(source, "_genesis.so")):
            shutil.copyfile(library, os.path.join(pkg, os.path.basename(library)))
        info = os.path.join(staging, dist_info)
        os.makedirs(info)
        with open(os.path.join(info, "METADATA"), "w") as f:
            f.write(f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\n"
                    f"Summary: {SUMMARY}\nRequires-Python: =={tag[2]}.{tag[3:]}.*\n")
        with open(os.path.join(info, "WHEEL"), "w") as f:
            f.write(f"Wheel-Version: 1.0\nGenerator: genesis build_wheel\nRoot-Is-Purelib: false\n"
                    f"Tag: {tag}-{tag}-{platform_tag()}\n")
        with WheelFile(wheel_path, "w") as wheel:
            wheel.write_files(staging)
    return wheel_path


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out_dir", required=True, help="where the .whl is written")
    parser.add_argument("--python_tag", help="e.g. cp312; default: this Python's")
    args = parser.parse_args(argv)
    print(build(os.path.abspath(args.out_dir), args.python_tag))
    return 0


if __name__ == "__main__":
    sys.exit(main())
