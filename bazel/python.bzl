"""py_extension: a C++ Python extension module built in the configuration it needs.

A shared library cannot hold Debian's static abseil archives (position-dependent code),
so the extension's cc_binary is built with `@com_google_absl//:link=shared` through a
transition, whatever the command line's configuration: `bazel test //...` builds the
extension and its Python tests with no flag, and the process then holds one abseil (the
system's shared one) for the extension and anything else that loads it.
"""

def _shared_abseil_impl(settings, attr):
    return {"@com_google_absl//:link": "shared"}

_shared_abseil = transition(
    implementation = _shared_abseil_impl,
    inputs = [],
    outputs = ["@com_google_absl//:link"],
)

def _py_extension_impl(ctx):
    binaries = ctx.attr.binary[0][DefaultInfo].files.to_list()
    if len(binaries) != 1:
        fail("%s must build exactly one file, not %s" % (ctx.attr.binary[0].label, binaries))
    out = ctx.actions.declare_file(ctx.attr.module + ".so")
    ctx.actions.symlink(output = out, target_file = binaries[0])
    runfiles = ctx.runfiles(files = [out])
    runfiles = runfiles.merge(ctx.attr.binary[0][DefaultInfo].default_runfiles)
    return [DefaultInfo(files = depset([out]), runfiles = runfiles)]

py_extension = rule(
    implementation = _py_extension_impl,
    doc = "The shared library of `binary` (a cc_binary with linkshared) as `module`.so, " +
          "built with abseil's shared libraries.",
    attrs = {
        "binary": attr.label(mandatory = True, cfg = _shared_abseil),
        "module": attr.string(mandatory = True, doc = "The file name without .so."),
        "_allowlist_function_transition": attr.label(
            default = "@bazel_tools//tools/allowlists/function_transition_allowlist",
        ),
    },
)
