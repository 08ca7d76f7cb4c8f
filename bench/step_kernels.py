#!/usr/bin/env python3
"""Where a training step's GPU time goes, kernel by kernel, from Nsight
Compute's CSV of a whole `hpmc bench` run (scripts/gpu-check device
profile-step):

    ncu --metrics gpu__time_duration.sum --cache-control none --csv \\
        hpmc bench configs/cifar_ae.yaml --impl im2col --precision bf16 \\
        --batch 64 --warmup 1 --steps 1 --repeats 1 > step.csv
    python3 bench/step_kernels.py step.csv

Steps are told apart by the optimizer's kernel (a name with "sgd_kernel" or
"adam_kernel", or --step-end): the launches after one such launch up to and
including the next one are one step. Prints a markdown table of every
kernel name (without its template arguments) with its launches and µs a step
(over the whole steps seen), the step's total, then the last whole step's
launches in order."""
import argparse
import csv
import re
import sys


def short(name):
    """A kernel's name without its namespace, arguments and template list
    (ncu writes an anonymous namespace as "(anonymous namespace)",
    "<unnamed>" or "unnamed>")."""
    name = re.sub(r"\(anonymous namespace\)::|<?unnamed>::", "", name)
    name = re.sub(r"^void ", "", name).split("(")[0]
    depth, out = 0, []
    for ch in name:  # drop <...> at any depth
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(depth - 1, 0)
        elif depth == 0:
            out.append(ch)
    return "".join(out).strip().split("::")[-1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--step-end", default=r"sgd_kernel|adam_kernel",
                    help="regex of the kernel that ends a step (default the optimizers')")
    a = ap.parse_args()
    rows = []
    with open(a.csv, newline="") as f:
        lines = [ln for ln in f if ln.startswith('"')]  # ncu's own log lines are not quoted
    for r in csv.DictReader(lines):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        v = float(r["Metric Value"].replace(",", ""))
        unit = r.get("Metric Unit", "nsecond")
        us = v / 1000.0 if unit.startswith("n") else v * 1000.0 if unit.startswith("m") else v
        rows.append((short(r["Kernel Name"]), us))
    ends = [i for i, (n, _) in enumerate(rows) if re.search(a.step_end, n)]
    if len(ends) < 2:
        sys.exit(f"step_kernels: {a.csv}: fewer than two optimizer launches "
                 f"({len(rows)} kernels); nothing to split into steps")
    steps = len(ends) - 1
    body = rows[ends[0] + 1:ends[-1] + 1]
    per = {}
    for n, us in body:
        c, t = per.get(n, (0, 0.0))
        per[n] = (c + 1, t + us)
    total = sum(t for _, t in per.values()) / steps
    print(f"{steps} whole steps, {len(body) // steps} launches and {total:.1f} µs of kernels "
          "a step\n")
    print("| kernel | launches a step | µs a step | share |")
    print("| --- | ---: | ---: | ---: |")
    for n, (c, t) in sorted(per.items(), key=lambda kv: -kv[1][1]):
        print(f"| {n} | {c / steps:g} | {t / steps:.1f} | {100 * t / steps / total:.1f}% |")
    print("\nThe last step, launch by launch (µs):\n")
    for n, us in rows[ends[-2] + 1:ends[-1] + 1]:
        print(f"    {us:8.1f}  {n}")


if __name__ == "__main__":
    main()
