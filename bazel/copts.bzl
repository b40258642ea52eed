"""Compiler flags shared by every genesis target (one place, as in abseil's copts)."""

# C++20 is required by the public headers, so consumers compile them with it as well.
GENESIS_COPTS = [
    "-std=c++20",
    "-Wall",
    "-Wextra",
    "-Wno-unused-parameter",
]

# Test and benchmark binaries: the same flags; kept separate so they can diverge.
GENESIS_TEST_COPTS = GENESIS_COPTS
