"""The wheel installs into a fresh virtual environment, where `import genesis` works with
no Bazel and no build tree."""

import os
import subprocess
import sys
import tempfile
import unittest

import build_wheel

PROGRAM = """
import genesis, numpy
assert genesis.__file__.startswith(%r), genesis.__file__
s = genesis.arange(6, dtype=genesis.float32).reshape(2, 3)
assert numpy.from_dlpack(s).sum() == 15
assert genesis.device('cpu').memory_stats()['num_allocations'] >= 1
print('wheel ok', genesis.__file__)
"""


class WheelTest(unittest.TestCase):

    def test_installs_and_imports_in_a_venv(self):
        with tempfile.TemporaryDirectory(dir=os.environ.get("TEST_TMPDIR")) as d:
            wheel = build_wheel.build(os.path.join(d, "dist"), None)
            self.assertTrue(os.path.basename(wheel).startswith("genesis-0.1.0-cp3"))
            venv = os.path.join(d, "venv")
            # System site-packages for NumPy only; genesis must come from the wheel.
            subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv],
                           check=True)
            python = os.path.join(venv, "bin", "python")
            subprocess.run([python, "-m", "pip", "install", "--no-index", "--no-deps", "-q",
                            wheel], check=True)
            site = subprocess.run(
                [python, "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])"],
                check=True, capture_output=True, text=True).stdout.strip()
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": d}
            out = subprocess.run([python, "-c", PROGRAM % site], check=True, cwd=d, env=env,
                                 capture_output=True, text=True)
            self.assertIn("wheel ok", out.stdout)
            installed = os.listdir(os.path.join(site, "genesis"))
            self.assertIn("_genesis.so", installed)
            self.assertTrue(any(f.startswith("libabsl_") for f in installed))
            self.assertTrue(any(f.startswith("libhwy") for f in installed))


if __name__ == "__main__":
    unittest.main()
