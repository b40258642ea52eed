#!/usr/bin/env python3
"""README.md's "How fast" table, generated from the reports of `genesis bench`.

    bazel run //tools/readme:headline -- --write   # rewrite the table in README.md
    bazel run //tools/readme:headline -- --check   # exit 1 if README.md disagrees
    bazel run //tools/readme:headline              # print the table

(`python3 tools/readme/headline.py ...` from the repository root does the same.)

The rows come from tools/readme/headline_rows.txt (results folder, row label, baseline
label), their figures from benchmarks/results/<folder>/summary.json, and each row links
to benchmarks/results/<folder>/report.md. The table sits in README.md between the lines
`<!-- headline:begin -->` and `<!-- headline:end -->`; nothing outside them is touched.
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import re
import sys
from typing import Iterable, Optional

BEGIN = "<!-- headline:begin -->"
END = "<!-- headline:end -->"
README = "README.md"
ROWS_FILE = "tools/readme/headline_rows.txt"
RESULTS_DIR = "benchmarks/results"
WRITE_COMMAND = "bazel run //tools/readme:headline -- --write"
GENERATED_NOTE = (
    f"<!-- generated from {ROWS_FILE} and {RESULTS_DIR}/*/summary.json by "
    f"`{WRITE_COMMAND}`; edit those, not this table -->"
)
HEADER = [
    "| figure | genesis | baseline | speed-up | target | report |",
    "| --- | --- | --- | --- | --- | --- |",
]


class HeadlineError(Exception):
    """An input the table cannot be made from; the message says which and why."""


@dataclasses.dataclass(frozen=True)
class RowSpec:
    """One line of the rows file: which row of which report goes into the table."""

    folder: str
    label: str
    baseline: str
    run: Optional[str]
    line: int

    def describe(self) -> str:
        """The row as a person finds it in the report: folder, label, baseline."""
        run = f", run {self.run}" if self.run else ""
        return f"{self.folder}: '{self.label}' against '{self.baseline}'{run}"


def read_row_specs(path: str) -> list[RowSpec]:
    """Parses the rows file; raises HeadlineError naming the line of a malformed entry.

    Blank lines and lines starting with '#' are skipped. Returns the rows in file order.
    """
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise HeadlineError(f"cannot read the rows file {path}: {e.strerror}") from e
    specs = []
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        fields = [field.strip() for field in text.split(" | ")]
        if len(fields) not in (3, 4) or not all(fields):
            raise HeadlineError(
                f"{path}:{number}: expected 'folder | label | baseline [| run]', got {text!r}")
        specs.append(RowSpec(fields[0], fields[1], fields[2],
                             fields[3] if len(fields) == 4 else None, number))
    if not specs:
        raise HeadlineError(f"{path} lists no rows")
    return specs


def load_json(path: str) -> dict:
    """The JSON object in `path`; raises HeadlineError if it is missing or malformed."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise HeadlineError(f"cannot read {path}: {e.strerror}") from e
    except json.JSONDecodeError as e:
        raise HeadlineError(f"{path} is not valid JSON: {e}") from e


def find_row(summary: dict, spec: RowSpec, summary_path: str) -> dict:
    """The one row of `summary` that `spec` names; raises HeadlineError for none or several.

    A row matches on its label and baseline label, and on its run where the spec gives one.
    """
    rows = summary.get("rows")
    if not isinstance(rows, list):
        raise HeadlineError(f"{summary_path} has no list of rows")
    matches = [
        row for row in rows
        if row.get("label") == spec.label and row.get("baseline_label") == spec.baseline
        and (spec.run is None or row.get("run") == spec.run)
    ]
    if len(matches) == 1:
        return matches[0]
    where = f"{ROWS_FILE}:{spec.line}"
    if not matches:
        baselines = sorted({row.get("baseline_label", "") for row in rows
                            if row.get("label") == spec.label})
        hint = (f"; that label's baselines there: {', '.join(baselines)}" if baselines
                else "; no row of that label")
        raise HeadlineError(f"{where}: {spec.describe()} is not in {summary_path}{hint}")
    runs = ", ".join(sorted(row.get("run", "") for row in matches))
    raise HeadlineError(
        f"{where}: {spec.describe()} matches {len(matches)} rows of {summary_path} "
        f"(runs {runs}): add the run as a fourth field")


def slug(heading: str) -> str:
    """The anchor a Markdown viewer such as GitHub's gives a heading's text."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def suite_anchor(report_path: str, suite: str) -> str:
    """'#<anchor>' of the report's section for `suite` ('## <suite>: ...'), or '' if none."""
    try:
        with open(report_path, encoding="utf-8") as f:
            for line in f:
                if line.startswith(f"## {suite}:"):
                    return "#" + slug(line[3:])
    except OSError:
        return ""
    return ""


def format_ratio(ratio: float) -> str:
    """The speed-up as the report writes it: 3 significant digits, then 'x'; '-' if none."""
    if not ratio or ratio <= 0:
        return "-"
    if ratio >= 100:
        return f"{ratio:.0f}x"
    if ratio >= 10:
        return f"{ratio:.1f}x"
    return f"{ratio:.2f}x"


def format_target(target: float, met: str, text: str = "") -> str:
    """'>= 12x: met', '<= +1.00 us: **missed**', or '' where the report states no target.

    `text` is the report's own wording of the target (summary.json's "target_text", which
    reports before it lack); without it the target is a speed-up of at least `target`.
    """
    if not text:
        if not target or target <= 0:
            return ""
        text = f">= {target:.3g}x"
    verdict = {"yes": "met", "no": "**missed**"}.get(met, met or "not measured")
    return f"{text}: {verdict}"


def cell(text: str) -> str:
    """`text` made safe for a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ").strip()


def machine_text(machine: dict) -> str:
    """A short description of a report's machine from its machine.json: GPUs and CPUs."""
    gpus = collections.Counter(d.get("name", "GPU") for d in machine.get("devices", []))
    parts = [f"{count} x {name}" for name, count in sorted(gpus.items())] or ["no GPU"]
    cpus = machine.get("host", {}).get("cpus")
    if cpus:
        parts.append(f"{cpus} CPUs")
    return ", ".join(parts)


def render_block(root: str, specs: list[RowSpec]) -> list[str]:
    """The lines between the markers: a note, the table, and one line per report used.

    Raises HeadlineError if a folder's summary is missing or a row is not found.
    """
    summaries: dict[str, dict] = {}
    lines = [GENERATED_NOTE, ""] + HEADER
    folders = []
    for spec in specs:
        summary_path = f"{RESULTS_DIR}/{spec.folder}/summary.json"
        if spec.folder not in summaries:
            summaries[spec.folder] = load_json(os.path.join(root, summary_path))
            folders.append(spec.folder)
        row = find_row(summaries[spec.folder], spec, summary_path)
        report = f"{RESULTS_DIR}/{spec.folder}/report.md"
        anchor = suite_anchor(os.path.join(root, report), row.get("suite", ""))
        cells = [
            cell(row.get("label", "")),
            cell(row.get("figure_text", "")),
            cell(f"{row.get('baseline_label', '')}: {row.get('baseline_text', '')}"),
            format_ratio(row.get("ratio", 0)),
            format_target(row.get("target", 0), row.get("met", ""), row.get("target_text", "")),
            f"[{spec.folder}]({report}{anchor})",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for folder in folders:
        summary = summaries[folder]
        machine_path = os.path.join(root, RESULTS_DIR, folder, "machine.json")
        machine = load_json(machine_path) if os.path.exists(machine_path) else {}
        date = str(summary.get("date", ""))[:10]
        how = "`genesis bench --quick`" if summary.get("quick") else "`genesis bench`"
        lines.append(
            f"- [{folder}]({RESULTS_DIR}/{folder}/report.md): {machine_text(machine)}; "
            f"{how} of {date}, medians of {summary.get('repetitions', '?')} repetitions.")
    return lines


def split_readme(text: str, readme_path: str) -> tuple[list[str], list[str], list[str]]:
    """README's lines before the begin marker (inclusive), between, and from the end marker.

    Raises HeadlineError unless each marker appears exactly once, begin before end.
    """
    lines = text.split("\n")
    begins = [i for i, line in enumerate(lines) if line.strip() == BEGIN]
    ends = [i for i, line in enumerate(lines) if line.strip() == END]
    if len(begins) != 1 or len(ends) != 1 or begins[0] > ends[0]:
        raise HeadlineError(
            f"{readme_path} must hold one line '{BEGIN}' and, after it, one line '{END}' "
            f"(found {len(begins)} and {len(ends)})")
    return lines[:begins[0] + 1], lines[begins[0] + 1:ends[0]], lines[ends[0]:]


TABLE_ROW = re.compile(r"^\|(.*)\|\s*$")


def row_key(line: str) -> Optional[tuple[str, str, str]]:
    """(figure, baseline, report) of a table row of the block; None for other lines."""
    match = TABLE_ROW.match(line)
    if not match or line in HEADER:
        return None
    cells = [c.strip() for c in re.split(r"(?<!\\)\|", match.group(1))]
    if len(cells) < 6:
        return (cells[0], "", "") if cells else None
    baseline = cells[2].rsplit(": ", 1)[0]
    return cells[0], baseline, cells[5]


def describe_key(key: tuple[str, str, str]) -> str:
    """A table row's identity in words, for messages."""
    figure, baseline, report = key
    report = re.sub(r"^\[([^\]]*)\].*$", r"\1", report)
    return f"'{figure}' against '{baseline}' ({report})" if baseline else f"'{figure}'"


def differences(actual: list[str], expected: list[str]) -> list[str]:
    """What separates README's block from the generated one, one message per row or line.

    Empty when they are the same.
    """
    if actual == expected:
        return []
    messages = []
    actual_rows = [(row_key(l), l) for l in actual if row_key(l)]
    expected_rows = [(row_key(l), l) for l in expected if row_key(l)]
    actual_by_key = dict(actual_rows)
    expected_by_key = dict(expected_rows)
    for key, line in expected_rows:
        if key not in actual_by_key:
            messages.append(f"row {describe_key(key)} is missing from the README; "
                            f"the reports give:\n      {line}")
        elif actual_by_key[key] != line:
            messages.append(f"row {describe_key(key)} differs:\n"
                            f"      README:  {actual_by_key[key]}\n"
                            f"      reports: {line}")
    for key, line in actual_rows:
        if key not in expected_by_key:
            messages.append(f"row {describe_key(key)} is in the README but not in "
                            f"{ROWS_FILE} or not in its report:\n      {line}")
    if not messages and [k for k, _ in actual_rows] != [k for k, _ in expected_rows]:
        messages.append(f"the rows are in another order than in {ROWS_FILE}")
    actual_other = [l for l in actual if not row_key(l)]
    expected_other = [l for l in expected if not row_key(l)]
    if actual_other != expected_other:
        extra = [l for l in actual_other if l not in expected_other]
        missing = [l for l in expected_other if l not in actual_other]
        for line in missing:
            messages.append(f"line missing from the README: {line!r}")
        for line in extra:
            messages.append(f"line in the README that the reports do not give: {line!r}")
        if not extra and not missing:
            messages.append("the lines around the table are in another order")
    return messages


def check(root: str, readme: str = README, rows_file: str = ROWS_FILE) -> list[str]:
    """The differences between README's table and the reports (empty: they agree).

    Raises HeadlineError if the inputs cannot be read or a listed row is not found.
    """
    readme_path = os.path.join(root, readme)
    try:
        with open(readme_path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise HeadlineError(f"cannot read {readme_path}: {e.strerror}") from e
    _, block, _ = split_readme(text, readme)
    expected = render_block(root, read_row_specs(os.path.join(root, rows_file)))
    return differences(block, expected)


def write(root: str, readme: str = README, rows_file: str = ROWS_FILE) -> bool:
    """Rewrites README's block from the reports; returns whether the file changed.

    Raises HeadlineError (and writes nothing) if a row cannot be made.
    """
    readme_path = os.path.join(root, readme)
    with open(readme_path, encoding="utf-8") as f:
        text = f.read()
    before, block, after = split_readme(text, readme)
    expected = render_block(root, read_row_specs(os.path.join(root, rows_file)))
    if block == expected:
        return False
    with open(readme_path, "w", encoding="utf-8") as f:
        f.write("\n".join(before + expected + after))
    return True


def default_root() -> str:
    """The repository: the workspace under `bazel run`, else the current directory."""
    return os.environ.get("BUILD_WORKSPACE_DIRECTORY") or os.getcwd()


def main(argv: Iterable[str]) -> int:
    """Runs the command line; returns the exit status (0 ok, 1 disagreement or error)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="rewrite the table in README.md")
    mode.add_argument("--check", action="store_true",
                      help="exit 1, naming the rows, if README.md's table disagrees")
    parser.add_argument("--root", default=None,
                        help="repository root (default: the Bazel workspace or the "
                             "current directory)")
    parser.add_argument("--readme", default=README, help="relative to the root")
    parser.add_argument("--rows", default=ROWS_FILE, help="relative to the root")
    args = parser.parse_args(list(argv))
    root = args.root or default_root()
    try:
        if args.write:
            changed = write(root, args.readme, args.rows)
            print(f"{args.readme}: headline table {'rewritten' if changed else 'unchanged'}")
            return 0
        if args.check:
            messages = check(root, args.readme, args.rows)
            if not messages:
                print(f"{args.readme}: the headline table agrees with the reports")
                return 0
            print(f"{args.readme}: the headline table disagrees with the reports "
                  f"({len(messages)} difference(s)); `{WRITE_COMMAND}` rewrites it:")
            for message in messages:
                print(f"  {message}")
            return 1
        print("\n".join(render_block(root, read_row_specs(os.path.join(root, args.rows)))))
        return 0
    except HeadlineError as e:
        print(f"headline: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
