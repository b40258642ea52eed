#!/usr/bin/env bash
# Runs doc_links_test.py over README.md and every Markdown file of docs/, from the
# runfiles tree (which holds the files they link to).
set -euo pipefail
cd "${TEST_SRCDIR}/${TEST_WORKSPACE}"
exec python3 tests/doc_links_test.py README.md docs/*.md
