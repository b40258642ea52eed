"""Repository rule for a library that Debian installs under /usr.

Why: the offline build cannot download GoogleTest, Google Benchmark, nlohmann-json or
dlpack, so, like TensorFlow's third_party/systemlibs, each becomes a repository whose
BUILD file (third_party/systemlibs/<name>.BUILD) wraps the installed files. Libraries
are linked into the repository so Bazel tracks them; headers stay on the system include
path. A missing package fails the fetch with the Debian package that provides it.
"""

_LIB_DIRS = [
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/lib",
]

def _system_library_impl(rctx):
    missing = []
    for header in rctx.attr.headers:
        if not rctx.path("/usr/include/" + header).exists:
            missing.append("/usr/include/" + header)
    for lib in rctx.attr.libraries:
        found = None
        for d in _LIB_DIRS:
            if rctx.path(d + "/" + lib).exists:
                found = d + "/" + lib
                break
        if found:
            rctx.symlink(found, "lib/" + lib)
        else:
            missing.append(lib)
    if missing:
        fail("@%s: %s not found; install Debian's %s (tools/setup.sh does)" %
             (rctx.name, ", ".join(missing), rctx.attr.debian_package))
    rctx.symlink(rctx.attr.build_file, "BUILD.bazel")
    rctx.file("WORKSPACE", 'workspace(name = "%s")\n' % rctx.name)

system_library = repository_rule(
    implementation = _system_library_impl,
    local = True,
    attrs = {
        "build_file": attr.label(mandatory = True, allow_single_file = True),
        "debian_package": attr.string(mandatory = True),
        "headers": attr.string_list(doc = "Paths under /usr/include that must exist."),
        "libraries": attr.string_list(doc = "Library files linked into lib/."),
    },
)
