#!/usr/bin/env python3
"""Every relative link of the given Markdown files resolves to a file of the tree.

    doc_links_test.py README.md docs/a.md ...

Checks [text](target) and <img src="target">; skips web addresses, mail addresses and
links within the page (#...); a target's #anchor is dropped before the check. Prints
each broken link as FILE:LINE: target, and exits 1 if there is any.
"""
import os
import re
import sys

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|<img[^>]*\ssrc=\"([^\"]+)\"")


def broken_links(path: str) -> list:
    """The (line, target) pairs of `path` whose file does not exist."""
    found = []
    base = os.path.dirname(path)
    in_code = False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.lstrip().startswith("```"):
                in_code = not in_code
            if in_code:
                continue
            for match in LINK.finditer(line):
                target = match.group(1) or match.group(2)
                if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                    continue
                file_part = target.split("#", 1)[0]
                if not os.path.exists(os.path.join(base, file_part)):
                    found.append((number, target))
    return found


def main() -> int:
    failures = 0
    for path in sys.argv[1:]:
        for number, target in broken_links(path):
            print(f"{path}:{number}: {target} does not resolve")
            failures += 1
    print(f"{len(sys.argv) - 1} files, {failures} broken links")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
