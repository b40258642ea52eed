#!/bin/sh
echo "coverage is unavailable in the offline Bazel 4.2.3 build (no remote_coverage_tools)" >&2
exit 1
