#!/usr/bin/env python3
"""Charts of the bench scripts' JSON. bench/compare.py's: a bar chart, one
panel per (model, device), epoch-equivalent seconds per run on a log scale,
hpmc's bars in one colour and PyTorch's in another, each labelled with its
time. bench/sweep.py's (a JSON with "points"): a panel per target of the
sweep's precision whose PyTorch mode it timed, hpmc's step time over that
mode's against the work of a step, log-log, with the target's line: in fp32
PyTorch FP32 (1.0) and its CUDA-graph step (0.5, filled markers: the points
where that step is launch-bound, under the sweep's --launch-bound-ms); in
tf32 PyTorch's defaults (1.0) and the graph step; in bf16 PyTorch's bf16 +
channels-last + CUDA-graph step (0.8). Points that miss a target are
labelled.

    /usr/bin/python3 bench/plot.py gpu.json cpu.json -o docs/performance.png
    /usr/bin/python3 bench/plot.py sweep/sweep.json -o docs/sweep.png

Needs matplotlib (Debian: python3-matplotlib).
"""
import argparse
import json
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import ticker  # noqa: E402


def series(p):
    """The legend entry, colour and marker of a sweep point."""
    if p["family"] == "mlp":
        colours = {1: "#1b9e77", 2: "#d95f02", 4: "#7570b3"}
        return f"MLP, {p['depth']} hidden", colours.get(p["depth"], "#666666"), "o"
    return (f"AE {p['kernel']}x{p['kernel']}", "#e7298a" if p["kernel"] == 3 else "#e6ab02",
            "s" if p["kernel"] == 3 else "^")


MODE_LABELS = {"fp32": "PyTorch FP32 (TF32 off)", "default": "PyTorch defaults",
               "graph": "PyTorch's CUDA-graph step", "bf16cl": "PyTorch bf16 + channels-last",
               "bf16clg": "PyTorch bf16 + channels-last + CUDA graph"}
# A sweep's JSON from before precisions names no targets: fp32's were judged.
FP32_TARGETS = [{"mode": "fp32", "at_most": 1.0, "launch_bound_only": False},
                {"mode": "graph", "at_most": 0.5, "launch_bound_only": True}]


def plot_sweep(rep, out):
    """The sweep's chart (see the file's header) into `out`."""
    s = rep["settings"]
    pts = [p for p in rep["points"] if p.get("ratios")]
    panels = [t for t in s.get("targets", FP32_TARGETS)
              if t["mode"] == "fp32" or any(t["mode"] in p["ratios"] for p in pts)]
    if not any(any(t["mode"] in p["ratios"] for p in pts) for t in panels):
        # No target's mode timed (a bf16 sweep on the CPU): the first mode, no line.
        first = next((md for md in s["modes"] if any(md in p["ratios"] for p in pts)), "fp32")
        panels = [{"mode": first, "at_most": None, "launch_bound_only": False}]
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 5), squeeze=False)
    m = rep["machine"]
    where = m.get("gpu", "").split(",")[0] if m["device"] == "cuda" else m.get("cpu", "")
    for ax, t in zip(axes[0], panels):
        mode, line, lb_only = t["mode"], t["at_most"], t["launch_bound_only"]
        label = f"hpmc / {MODE_LABELS.get(mode, mode)}"

        def launch_bound(p):
            return p["pytorch"][mode]["ms"] < s["launch_bound_ms"]

        seen = set()
        over = [p for p in pts if line and mode in p["ratios"] and p["ratios"][mode] > line and
                (not lb_only or launch_bound(p))]
        for p in pts:
            if mode not in p["ratios"]:
                continue
            name, colour, marker = series(p)
            filled = not lb_only or launch_bound(p)
            size = 12 + 10 * math.log2(max(p["batch"], 16) / 16) ** 0.8
            ax.scatter(p["work_flops"], p["ratios"][mode], s=size, marker=marker,
                       facecolors=colour if filled else "none", edgecolors=colour,
                       label=None if name in seen else name)
            seen.add(name)
            if p in over and len(over) <= 12:  # more would be unreadable: the table names them
                ax.annotate(p["id"], (p["work_flops"], p["ratios"][mode]), fontsize=6,
                            xytext=(3, 2), textcoords="offset points")
        if line:
            ax.axhline(line, color="#444444", linestyle="--", linewidth=1)
            ax.text(0.01, line, f" target {line:g}x", transform=ax.get_yaxis_transform(),
                    fontsize=7, va="bottom")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        # Between the powers of ten, only 2 and 5 labelled.
        ax.yaxis.set_minor_formatter(
            ticker.FuncFormatter(lambda v, _: f"{v:g}" if f"{v:.0e}"[0] in "25" else ""))
        ax.tick_params(axis="y", which="minor", labelsize=6)
        ax.set_xlabel("work per step (FLOP; forward and backward matrix products)", fontsize=8)
        ax.set_ylabel(f"{label} (ms/step ratio; below 1: hpmc faster)", fontsize=8)
        title = f"{where}, {m['date']}, hpmc --impl {s['impl']} in {s.get('precision', 'fp32')}"
        if lb_only:
            title += f"; filled: PyTorch's step < {s['launch_bound_ms']:g} ms"
        ax.set_title(title, fontsize=8, loc="left")
        ax.legend(fontsize=7, title="marker size: batch", title_fontsize=7)
        ax.grid(True, which="major", linewidth=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    print(f"wrote {out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("json", nargs="+")
    ap.add_argument("-o", "--out", required=True)
    args = ap.parse_args()
    panels = []
    for path in args.json:
        with open(path) as f:
            rep = json.load(f)
        if "points" in rep:  # bench/sweep.py's
            if len(args.json) > 1:
                raise SystemExit("plot.py: a sweep's JSON is plotted alone")
            plot_sweep(rep, args.out)
            return
        where = rep["machine"].get("gpu") or rep["machine"].get("cpu", "")
        for model, rows in rep["results"].items():
            panels.append((f"{model} — {rep['machine']['device']}: {where.split(',')[0]}", rows))
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 1.2 + 0.42 * sum(len(r) for _, r in panels)),
                             squeeze=False)
    for ax, (title, rows) in zip(axes[:, 0], panels):
        names = [r["name"] + (f", {r['threads']} thr" if r.get("threads") else "") for r in rows]
        secs = [r["epoch_s"] for r in rows]
        colors = ["#d95f02" if r["who"] == "hpmc" else "#7570b3" for r in rows]
        y = range(len(rows))
        ax.barh(y, secs, color=colors)
        ax.set_yticks(list(y))
        ax.set_yticklabels(names, fontsize=8)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.set_title(title, fontsize=9, loc="left")
        ax.set_xlabel("epoch-equivalent seconds (log scale; shorter is faster)", fontsize=8)
        for i, s in enumerate(secs):
            ax.text(s, i, f" {s:.3g} s", va="center", fontsize=7)
        ax.set_xlim(min(secs) / 1.5, max(secs) * 3)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
