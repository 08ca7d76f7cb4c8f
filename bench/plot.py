#!/usr/bin/env python3
"""Bar chart of bench/compare.py results: one panel per (model, device),
epoch-equivalent seconds per run on a log scale, hpmc's bars in one colour
and PyTorch's in another, each labelled with its time.

    /usr/bin/python3 bench/plot.py gpu.json cpu.json -o docs/performance.png

Needs matplotlib (Debian: python3-matplotlib).
"""
import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("json", nargs="+")
    ap.add_argument("-o", "--out", required=True)
    args = ap.parse_args()
    panels = []
    for path in args.json:
        with open(path) as f:
            rep = json.load(f)
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
