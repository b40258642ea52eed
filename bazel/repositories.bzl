"""External repositories of genesis, for this workspace and for workspaces that use it.

A consumer's WORKSPACE:

    local_repository(name = "genesis", path = "/path/to/genesis")  # or any other rule
    load("@genesis//bazel:repositories.bzl", "genesis_dependencies")
    genesis_dependencies()

Every repository is taken from the machine (Debian packages, the CUDA toolkit), so the
build is offline. A repository the consumer defined earlier under the same name is kept,
so a consumer may bring its own abseil or GoogleTest.
"""

load("//third_party/absl:system_absl.bzl", "system_absl")
load("//third_party/cuda:cuda_configure.bzl", "cuda_configure")
load("//third_party/python:system_python.bzl", "system_python")
load("//third_party/systemlibs:system_library.bzl", "system_library")

def _linked_files_impl(rctx):
    for dest, label in rctx.attr.files.items():
        rctx.symlink(rctx.path(Label(label)), dest)
    rctx.file("WORKSPACE", 'workspace(name = "%s")\n' % rctx.name)

# A repository made of files of this one (for the shims the offline Bazel needs).
_linked_files = repository_rule(
    implementation = _linked_files_impl,
    attrs = {"files": attr.string_dict(doc = "Path in the repository -> label of a file.")},
)

def _maybe(rule, name, **kwargs):
    if not native.existing_rule(name):
        rule(name = name, **kwargs)

def _label(path):
    return str(Label("//" + path))

def genesis_dependencies():
    """Defines every repository that genesis targets use."""

    # Bazel 4.2.3 asks for these three itself; see third_party/rules_cc and
    # third_party/remote_coverage_tools for why they are stand-ins.
    _maybe(
        _linked_files,
        name = "rules_cc",
        files = {
            "BUILD.bazel": _label("third_party/rules_cc:root.BUILD"),
            "cc/BUILD.bazel": _label("third_party/rules_cc:cc.BUILD"),
            "cc/defs.bzl": _label("third_party/rules_cc:defs.bzl"),
        },
    )
    _maybe(
        native.local_repository,
        name = "rules_java",
        path = "/usr/share/bazel/rules/java",  # Debian's bazel-rules-java
    )
    _maybe(
        _linked_files,
        name = "remote_coverage_tools",
        files = {
            "BUILD.bazel": _label("third_party/remote_coverage_tools:BUILD.remote_coverage_tools"),
            "unavailable.sh": _label("third_party/remote_coverage_tools:unavailable.sh"),
        },
    )
    _maybe(
        native.local_repository,
        name = "platforms",
        path = "/usr/share/bazel/platforms",  # Debian's bazel-platforms
    )

    _maybe(system_absl, name = "com_google_absl")
    _maybe(
        system_library,
        name = "com_google_googletest",
        build_file = _label("third_party/systemlibs:googletest.BUILD"),
        debian_package = "googletest / libgtest-dev / libgmock-dev",
        headers = ["gtest/gtest.h", "gmock/gmock.h"],
        libraries = ["libgtest.a", "libgtest_main.a", "libgmock.a", "libgmock_main.a"],
    )
    _maybe(
        system_library,
        name = "com_github_google_benchmark",
        build_file = _label("third_party/systemlibs:benchmark.BUILD"),
        debian_package = "libbenchmark-dev",
        headers = ["benchmark/benchmark.h"],
        libraries = ["libbenchmark.so", "libbenchmark_main.a"],
    )
    _maybe(
        system_library,
        name = "nlohmann_json",
        build_file = _label("third_party/systemlibs:nlohmann_json.BUILD"),
        debian_package = "nlohmann-json3-dev",
        headers = ["nlohmann/json.hpp"],
    )
    _maybe(
        system_library,
        name = "dlpack",
        build_file = _label("third_party/systemlibs:dlpack.BUILD"),
        debian_package = "libdlpack-dev",
        headers = ["dlpack/dlpack.h"],
    )
    _maybe(
        system_library,
        name = "zlib",
        build_file = _label("third_party/systemlibs:zlib.BUILD"),
        debian_package = "zlib1g-dev",
        headers = ["zlib.h"],
        libraries = ["libz.a"],
    )
    _maybe(
        system_library,
        name = "gloo",
        build_file = _label("third_party/systemlibs:gloo.BUILD"),
        debian_package = "libgloo-dev",
        headers = ["gloo/allreduce.h", "gloo/rendezvous/file_store.h"],
        libraries = ["libgloo.so.0"],
    )
    _maybe(
        system_library,
        name = "hwy",
        build_file = _label("third_party/systemlibs:hwy.BUILD"),
        debian_package = "libhwy-dev",
        headers = ["hwy/highway.h", "hwy/foreach_target.h"],
        libraries = ["libhwy.so.1"],
    )
    _maybe(system_python, name = "system_python")
    _maybe(
        system_library,
        name = "pybind11",
        build_file = _label("third_party/systemlibs:pybind11.BUILD"),
        debian_package = "pybind11-dev",
        headers = ["pybind11/pybind11.h"],
    )
    _maybe(cuda_configure, name = "local_config_cuda")
