"""Stand-in for @rules_cc//cc:defs.bzl that forwards to Bazel's native C++ rules.

Why: Bazel 4.2.3 (Debian's bazel-bootstrap) asks for a `rules_cc` repository, and Debian's
bazel-rules-cc is too new for it (it loads `use_cpp_toolchain`, which 4.2.3 lacks). These
wrappers keep `load("@rules_cc//cc:defs.bzl", ...)` working, so BUILD files read the same
as with upstream rules_cc and a consumer may substitute the real one.
"""

def cc_binary(**attrs):
    native.cc_binary(**attrs)

def cc_import(**attrs):
    native.cc_import(**attrs)

def cc_library(**attrs):
    native.cc_library(**attrs)

def cc_proto_library(**attrs):
    native.cc_proto_library(**attrs)

def cc_test(**attrs):
    native.cc_test(**attrs)

def cc_toolchain(**attrs):
    native.cc_toolchain(**attrs)

def cc_toolchain_suite(**attrs):
    native.cc_toolchain_suite(**attrs)

def fdo_prefetch_hints(**attrs):
    native.fdo_prefetch_hints(**attrs)

def fdo_profile(**attrs):
    native.fdo_profile(**attrs)

def objc_import(**attrs):
    native.objc_import(**attrs)

def objc_library(**attrs):
    native.objc_library(**attrs)
