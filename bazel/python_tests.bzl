"""Constraints shared by the Python tests (//python)."""

# Python tests do not run in sanitizer builds (//bazel:asan, //bazel:tsan): an
# instrumented extension module cannot load into the uninstrumented interpreter
# without the sanitizer's runtime preloaded.
NOT_UNDER_SANITIZERS = select({
    "//bazel:asan": ["//bazel:incompatible"],
    "//bazel:tsan": ["//bazel:incompatible"],
    "//conditions:default": [],
})
