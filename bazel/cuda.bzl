"""CUDA support for genesis BUILD files: `if_cuda` and `cuda_library`.

`if_cuda(a, b)` picks `a` in a build with CUDA and `b` in the CPU-only build (no toolkit
found, or --//bazel:cuda=off). `cuda_library` compiles `.cu` files with nvcc into objects
that link like any cc_library (it returns CcInfo), so cc_library, cc_binary and cc_test
depend on it directly; in the CPU-only build it is incompatible and `//...` skips it and
whatever needs it. Put kernels behind a plain C++ header so callers compile without nvcc.

The static CUDA runtime's symbols are hidden, so a shared library cannot call cudart
through the executable. A cc_library that calls the CUDA runtime itself must set
`linkstatic = True` (cuda_library does the equivalent), or tests, which Bazel links
against one shared object per library, fail with "undefined symbol: cuda...".
"""

load("@bazel_tools//tools/cpp:toolchain_utils.bzl", "find_cpp_toolchain")
load("@local_config_cuda//:config.bzl", "CUDA_FOUND", "CUDA_NOT_FOUND_REASON", "NCCL_DEVICE_FOUND", "NCCL_FOUND", "NVCC_PATH")
load("//bazel:flags.bzl", "FlagInfo")

_CUDA_OFF = str(Label("//bazel:cuda_off"))
_CUDA_ON = str(Label("//bazel:cuda_on"))
_UNAVAILABLE = str(Label("@local_config_cuda//:unavailable"))

def if_cuda(if_true, if_false = []):
    """Returns `if_true` where CUDA code is built, `if_false` in the CPU-only build."""
    if CUDA_FOUND:
        return select({_CUDA_OFF: if_false, "//conditions:default": if_true})
    return select({_CUDA_ON: if_true, "//conditions:default": if_false})

def if_nccl(if_true, if_false = []):
    """Returns `if_true` where CUDA code is built and NCCL was found, `if_false` otherwise."""
    if NCCL_FOUND:
        return if_cuda(if_true, if_false)
    return if_false

def if_nccl_device(if_true, if_false = []):
    """Like if_nccl, where NCCL's device API (nccl_device.h, NCCL 2.28+) was found too."""
    if NCCL_DEVICE_FOUND:
        return if_nccl(if_true, if_false)
    return if_false

def cuda_compatible():
    """target_compatible_with for targets that exist only in a build with CUDA."""
    return if_cuda([], [_UNAVAILABLE])

def _nvcc_arch_flags(setting, archs):
    flags = []
    for arch in archs.split(","):
        arch = arch.strip()
        kind, _, number = arch.partition("_")
        digits = number.rstrip("af")
        suffix = number[len(digits):]
        if (kind not in ("sm", "compute") or not digits.isdigit() or
            len(digits) not in (2, 3) or len(suffix) > 1):
            fail("invalid CUDA architecture '%s' in --%s=%s: expected a comma-separated " %
                 (arch, setting, archs) + "list of sm_NN (machine code) or compute_NN (PTX), e.g. sm_90,compute_90")
        virtual = "compute_" + number
        flags.append("-gencode=arch=%s,code=%s" % (virtual, arch))
    return flags

def _cuda_library_impl(ctx):
    if not CUDA_FOUND:
        fail("--//bazel:cuda=on, but CUDA cannot be built: %s. Set CUDA_PATH to a toolkit." %
             CUDA_NOT_FOUND_REASON)
    cc_toolchain = find_cpp_toolchain(ctx)
    feature_configuration = cc_common.configure_features(
        ctx = ctx,
        cc_toolchain = cc_toolchain,
        requested_features = ctx.features,
        unsupported_features = ctx.disabled_features,
    )
    deps = cc_common.merge_cc_infos(cc_infos = [d[CcInfo] for d in ctx.attr.deps])
    deps_cc = deps.compilation_context

    # Our headers are included as "genesis/..."; from another workspace they live under
    # external/genesis, which nvcc must be told about (Bazel's C++ rules do this themselves).
    root = ctx.label.workspace_root or "."
    includes = [root, ctx.bin_dir.path + ("/" + ctx.label.workspace_root if ctx.label.workspace_root else "")]
    include_flags = []
    for d in includes + deps_cc.quote_includes.to_list() + deps_cc.includes.to_list():
        include_flags.append("-I" + d)
    for d in deps_cc.system_includes.to_list():
        include_flags += ["-isystem", d]
    define_flags = ["-D" + d for d in deps_cc.defines.to_list()]

    mode = ctx.var["COMPILATION_MODE"]
    mode_flags = {"opt": ["-O3", "-DNDEBUG"], "dbg": ["-g", "-lineinfo"], "fastbuild": ["-O1"]}[mode]
    arch_flags = _nvcc_arch_flags("@genesis//bazel:cuda_archs", ctx.attr._archs[FlagInfo].value)

    objects = []
    inputs = depset(ctx.files.srcs + ctx.files.hdrs, transitive = [deps_cc.headers])
    for src in ctx.files.srcs:
        obj = ctx.actions.declare_file("_objs/%s/%s.o" % (ctx.label.name, src.basename.rpartition(".")[0]))
        args = ctx.actions.args()
        args.add_all(["-x", "cu", "-c", src.path, "-o", obj.path, "-std=c++20", "-Xcompiler", "-fPIC"])
        args.add_all(["--expt-relaxed-constexpr", "-Werror", "all-warnings"])
        args.add_all(mode_flags + arch_flags + include_flags + define_flags + ctx.attr.copts)
        ctx.actions.run(
            executable = NVCC_PATH,
            arguments = [args],
            inputs = inputs,
            outputs = [obj],
            mnemonic = "NvccCompile",
            progress_message = "Compiling %s with nvcc" % src.short_path,
            # nvcc calls the host compiler and assembler through PATH.
            use_default_shell_env = True,
        )
        objects.append(obj)

    compilation_outputs = cc_common.create_compilation_outputs(
        objects = depset(objects),
        pic_objects = depset(objects),
    )
    linking_context, _ = cc_common.create_linking_context_from_compilation_outputs(
        actions = ctx.actions,
        feature_configuration = feature_configuration,
        cc_toolchain = cc_toolchain,
        compilation_outputs = compilation_outputs,
        linking_contexts = [deps.linking_context],
        name = ctx.label.name,
        # A shared library would leave cudart's symbols unresolved in tests.
        disallow_dynamic_library = True,
    )
    own = CcInfo(compilation_context = cc_common.create_compilation_context(
        headers = depset(ctx.files.hdrs),
        quote_includes = depset(includes),
    ))
    merged = cc_common.merge_cc_infos(cc_infos = [own, deps])
    return [
        DefaultInfo(files = depset(objects)),
        CcInfo(compilation_context = merged.compilation_context, linking_context = linking_context),
    ]

_cuda_library = rule(
    implementation = _cuda_library_impl,
    attrs = {
        "srcs": attr.label_list(allow_files = [".cu"]),
        "hdrs": attr.label_list(allow_files = [".h", ".cuh"]),
        "deps": attr.label_list(providers = [CcInfo]),
        "copts": attr.string_list(doc = "Extra nvcc flags."),
        "_archs": attr.label(default = Label("//bazel:cuda_archs")),
        "_cc_toolchain": attr.label(default = Label("@bazel_tools//tools/cpp:current_cc_toolchain")),
    },
    fragments = ["cpp"],
    toolchains = ["@bazel_tools//tools/cpp:toolchain_type"],
    incompatible_use_toolchain_transition = True,
)

def cuda_library(name, srcs, hdrs = [], deps = [], copts = [], **kwargs):
    """Compiles `.cu` sources with nvcc; links with the static CUDA runtime.

    Args:
      name: target name.
      srcs: `.cu` files.
      hdrs: headers the sources include and dependents may include (plain C++ headers).
      deps: C++ dependencies (cc_library or cuda_library).
      copts: extra nvcc flags.
      **kwargs: visibility, testonly, tags, ...
    """
    _cuda_library(
        name = name,
        srcs = srcs,
        hdrs = hdrs,
        # Without a toolkit, leave cudart out so that --//bazel:cuda=on reaches the rule and
        # fails with the reason rather than with "incompatible".
        deps = deps + (["@local_config_cuda//:cudart"] if CUDA_FOUND else []),
        copts = copts,
        target_compatible_with = cuda_compatible(),
        **kwargs
    )
