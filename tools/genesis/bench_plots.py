#!/usr/bin/env python3
"""Draws the plots of a `genesis bench` report with matplotlib.

    python3 bench_plots.py PLOTS_JSON OUT_DIR

PLOTS_JSON is the plot spec genesis bench writes (tools/genesis/bench_report.h, PlotSpec):
{"plots": [{"file", "title", "kind": "lines" | "heatmap", ...}]}. Each plot becomes
OUT_DIR/<file> (PNG). Exit status 3, with the reason on the last line of stderr, when
matplotlib is missing; 1 on any other failure.
"""
import json
import math
import sys


def lines(plt, p, path):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for s in p["series"]:
        ax.plot(s["x"], s["y"], marker="o", label=s["label"])
    if p.get("xlog"):
        ax.set_xscale("log", base=2)
    if p.get("ylog"):
        ax.set_yscale("log")
    ax.set_xlabel(p["xlabel"])
    ax.set_ylabel(p["ylabel"])
    ax.set_title(p["title"])
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def heatmap(plt, p, path):
    labels = p["labels"]
    matrix = [[math.nan if v is None else v for v in row] for row in p["matrix"]]
    n = len(labels)
    fig, ax = plt.subplots(figsize=(2 + 0.9 * n, 1.5 + 0.8 * n))
    im = ax.imshow(matrix, cmap="viridis")
    ax.set_xticks(range(n), labels)
    ax.set_yticks(range(n), labels)
    ax.set_xlabel("to")
    ax.set_ylabel("from")
    for i in range(n):
        for j in range(n):
            v = matrix[i][j]
            ax.text(j, i, "-" if math.isnan(v) else f"{v:.3g}", ha="center", va="center",
                    color="white", fontsize="small")
    fig.colorbar(im, ax=ax, label=p["unit"])
    ax.set_title(p["title"], fontsize="medium")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv):
    if len(argv) != 3:
        print("usage: bench_plots.py PLOTS_JSON OUT_DIR", file=sys.stderr)
        return 1
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        print(f"matplotlib is not installed ({e}); tools/setup.sh installs python3-matplotlib",
              file=sys.stderr)
        return 3
    with open(argv[1]) as f:
        spec = json.load(f)
    for p in spec["plots"]:
        path = f"{argv[2]}/{p['file']}"
        (heatmap if p["kind"] == "heatmap" else lines)(plt, p, path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
