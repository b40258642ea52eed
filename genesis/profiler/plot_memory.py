"""Draws a memory profile: allocated and reserved bytes over time with markers, and the
blocks alive at the peak by call site. Input: the JSON that genesis/profiler/picture.cc
writes. Usage: plot_memory.py DATA.json OUT.png. Exit status 3: matplotlib is missing."""
import json
import sys

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError as e:  # The caller tries another interpreter or says what to install.
    print(f"matplotlib is not available to {sys.executable}: {e}", file=sys.stderr)
    sys.exit(3)


def human(n):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024.0


def main(data_path, out_path):
    with open(data_path) as f:
        data = json.load(f)
    width, height, dpi = data["width"], data["height"], data["dpi"]
    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(width / dpi, height / dpi), dpi=dpi,
        gridspec_kw={"height_ratios": [3, 2]})
    scale = 1024.0 ** 2
    for s in data["sources"]:
        t = s["t_ms"]
        top.step(t, [v / scale for v in s["reserved"]], where="post",
                 label=f"{s['label']} reserved")
        top.step(t, [v / scale for v in s["allocated"]], where="post",
                 label=f"{s['label']} allocated")
        if s.get("peak_t_ms") is not None:
            top.plot([s["peak_t_ms"]], [s["peak_allocated"] / scale], "v", color="black")
    for m in data["markers"]:
        top.axvline(m["t_ms"], color="gray", linewidth=0.6, linestyle=":")
    shown = data["markers"][: data.get("max_marker_labels", 20)]
    for m in shown:
        top.annotate(m["name"], (m["t_ms"], 1.0), xycoords=("data", "axes fraction"),
                     rotation=90, fontsize=7, va="top", ha="right", color="gray")
    top.set_xlabel("time (ms)")
    top.set_ylabel("MiB")
    top.set_title(data["title"])
    top.legend(loc="upper left", fontsize=8)
    top.grid(alpha=0.3)

    sites = data["peak_sites"]
    if sites:
        names = [s["site"] if len(s["site"]) <= 70 else s["site"][:67] + "..." for s in sites]
        values = [s["bytes"] / scale for s in sites]
        y = range(len(sites))
        bottom.barh(y, values, color="tab:orange")
        bottom.set_yticks(list(y))
        bottom.set_yticklabels(names, fontsize=7)
        bottom.invert_yaxis()
        for i, s in enumerate(sites):
            bottom.text(values[i], i, f" {human(s['bytes'])} in {s['count']}", va="center",
                        fontsize=7)
        bottom.set_xlabel("MiB alive at the peak")
    else:
        bottom.text(0.5, 0.5, "no blocks alive at the peak", ha="center", va="center")
        bottom.set_axis_off()
    bottom.set_title(data["peak_title"], fontsize=9)
    fig.tight_layout()
    fig.savefig(out_path, dpi=dpi)  # Not bbox_inches="tight": the size stays as asked.


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print("usage: plot_memory.py DATA.json OUT.png", file=sys.stderr)
        sys.exit(2)
    main(sys.argv[1], sys.argv[2])
