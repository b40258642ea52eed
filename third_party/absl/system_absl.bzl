"""Repository rule that exposes Debian's abseil (libabsl-dev) under upstream labels.

Why: the offline build cannot download abseil, and Debian ships it as static PIC archives
plus one pkg-config file per module. This rule reads those `.pc` files, creates one
cc_library per module (its archive, its `Requires:` as deps, so Bazel links them in
dependency order), and adds alias packages spelled like upstream abseil
(`@com_google_absl//absl/status:statusor`), so code and consumers are written as if
against upstream abseil and a consumer may swap in the real one under the same name.
Headers come from the system include path (/usr/include), as in TensorFlow's
third_party/systemlibs: declaring them would put hundreds of links into every sandbox.
Static archives are linked by default on purpose: binaries then run on machines without
libabsl. They are position-dependent code, which a shared library cannot contain, so each
module also comes as Debian's shared library, picked by the build setting
`@com_google_absl//:link` ("static" or "shared"): the Python extension (//python, through a
transition in //bazel:python.bzl) and the DLPack C ABI (`--config=pyext`) link the shared
ones, and so share one abseil with every other user of it in the process.
"""

# The build setting that picks the flavour; its value is read by config_setting only.
_LINK_SETTING_BZL = """
def _link_setting_impl(ctx):
    if ctx.build_setting_value not in ["static", "shared"]:
        fail("@com_google_absl//:link must be static or shared, not %s" % ctx.build_setting_value)
    return []

link_setting = rule(implementation = _link_setting_impl, build_setting = config.string(flag = True))
"""

# Upstream label -> pkg-config module (without the "absl_" prefix). Only modules that the
# installed abseil provides get an alias; asking for a missing one fails at analysis.
_UPSTREAM_LABELS = {
    "absl/algorithm": "algorithm",
    "absl/algorithm:container": "algorithm_container",
    "absl/base": "base",
    "absl/base:config": "config",
    "absl/base:core_headers": "core_headers",
    "absl/cleanup": "cleanup",
    "absl/container:btree": "btree",
    "absl/container:fixed_array": "fixed_array",
    "absl/container:flat_hash_map": "flat_hash_map",
    "absl/container:flat_hash_set": "flat_hash_set",
    "absl/container:inlined_vector": "inlined_vector",
    "absl/container:node_hash_map": "node_hash_map",
    "absl/container:node_hash_set": "node_hash_set",
    "absl/debugging:failure_signal_handler": "failure_signal_handler",
    "absl/debugging:stacktrace": "stacktrace",
    "absl/debugging:symbolize": "symbolize",
    "absl/flags:flag": "flags",
    "absl/flags:parse": "flags_parse",
    "absl/flags:usage": "flags_usage",
    "absl/functional:any_invocable": "any_invocable",
    "absl/functional:bind_front": "bind_front",
    "absl/functional:function_ref": "function_ref",
    "absl/hash": "hash",
    "absl/memory": "memory",
    "absl/numeric:bits": "bits",
    "absl/numeric:int128": "int128",
    "absl/random": "random_random",
    "absl/status": "status",
    "absl/status:statusor": "statusor",
    "absl/strings": "strings",
    "absl/strings:cord": "cord",
    "absl/strings:str_format": "str_format",
    "absl/synchronization": "synchronization",
    "absl/time": "time",
    "absl/types:optional": "optional",
    "absl/types:span": "span",
    "absl/types:variant": "variant",
    "absl/utility": "utility",
}

_PC_DIRS = [
    "/usr/lib/x86_64-linux-gnu/pkgconfig",
    "/usr/lib/aarch64-linux-gnu/pkgconfig",
    "/usr/lib64/pkgconfig",
    "/usr/lib/pkgconfig",
    "/usr/local/lib/pkgconfig",
]

def _field(text, name):
    for line in text.splitlines():
        if line.startswith(name + ":"):
            return line[len(name) + 1:].strip()
    return ""

def _system_absl_impl(rctx):
    pc_dir = None
    for d in _PC_DIRS:
        if rctx.path(d + "/absl_base.pc").exists:
            pc_dir = d
            break
    if pc_dir == None:
        fail("system abseil not found (no absl_base.pc in %s): run tools/setup.sh " % _PC_DIRS +
             "or `apt-get install libabsl-dev`")

    modules = {}
    for f in rctx.path(pc_dir).readdir():
        base = f.basename
        if not (base.startswith("absl_") and base.endswith(".pc")):
            continue
        text = rctx.read(f)
        libdir = pc_dir.rpartition("/")[0]
        requires = []
        for req in _field(text, "Requires").split(","):
            req = req.strip().split(" ")[0]
            if req.startswith("absl_"):
                requires.append(req[len("absl_"):])
        libraries = {"static": [], "shared": []}
        linkopts = []
        for tok in _field(text, "Libs").split(" "):
            if tok == "" or tok.startswith("-L"):
                continue
            if tok.startswith("-labsl_"):
                for flavour, pattern in [("static", "lib%s.a"), ("shared", "lib%s.so")]:
                    library = pattern % tok[2:]
                    if not rctx.path(libdir + "/" + library).exists:
                        fail("%s names %s but %s/%s is missing" % (base, tok, libdir, library))
                    rctx.symlink(libdir + "/" + library, "lib/" + library)
                    libraries[flavour].append("lib/" + library)
            elif tok not in linkopts:
                linkopts.append(tok)
        modules[base[len("absl_"):-len(".pc")]] = struct(
            requires = requires,
            libraries = libraries,
            linkopts = linkopts,
        )

    rctx.file("link.bzl", _LINK_SETTING_BZL)
    lines = [
        "# Generated by //third_party/absl:system_absl.bzl from %s." % pc_dir,
        'load(":link.bzl", "link_setting")',
        'package(default_visibility = ["//visibility:public"])',
        "",
        "# Which of Debian's libraries the modules link: static (the default) or shared.",
        'link_setting(name = "link", build_setting_default = "static")',
        'config_setting(name = "shared", flag_values = {":link": "shared"})',
        "",
    ]
    for name in sorted(modules):
        m = modules[name]
        for flavour in ["static", "shared"]:
            lines.append("cc_library(")
            lines.append('    name = "absl_%s_%s",' % (name, flavour))
            if m.libraries[flavour]:
                lines.append("    srcs = %s," % repr(m.libraries[flavour]))
                if flavour == "static":
                    lines.append("    linkstatic = True,")
            if m.linkopts:
                lines.append("    linkopts = %s," % repr(m.linkopts))
            deps = [":absl_%s_%s" % (r, flavour) for r in m.requires if r in modules]
            lines.append("    deps = %s," % repr(deps))
            lines.append(")")
        lines.append("alias(")
        lines.append('    name = "absl_%s",' % name)
        lines.append('    actual = select({":shared": ":absl_%s_shared", ' % name +
                     '"//conditions:default": ":absl_%s_static"}),' % name)
        lines.append(")")
    rctx.file("BUILD.bazel", "\n".join(lines) + "\n")

    packages = {}
    for label, module in _UPSTREAM_LABELS.items():
        if module not in modules:
            continue
        pkg, _, target = label.partition(":")
        if not target:
            target = pkg.rpartition("/")[2]
        packages.setdefault(pkg, []).append((target, module))
    for pkg, targets in packages.items():
        content = ['package(default_visibility = ["//visibility:public"])', ""]
        for target, module in sorted(targets):
            content.append('alias(name = "%s", actual = "//:absl_%s")' % (target, module))
        rctx.file(pkg + "/BUILD.bazel", "\n".join(content) + "\n")
    rctx.file("WORKSPACE", 'workspace(name = "%s")\n' % rctx.name)

system_absl = repository_rule(
    implementation = _system_absl_impl,
    local = True,
    doc = "Debian's libabsl-dev as @com_google_absl with upstream-style labels.",
)
