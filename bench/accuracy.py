#!/usr/bin/env python3
"""What a precision costs in accuracy: `hpmc run` of configs in each of
--precisions over several seeds, the last epoch's test accuracy (classifiers)
and test loss, each precision beside fp32. A seed gives every precision the
same initial weights and batch order, so the differences from fp32 are
paired seed by seed; their mean says how a precision trains, their spread
how much of a single run's difference is the run's own chance.

    # on the GPU (scripts/gpu-check device accuracy):
    python3 bench/accuracy.py --hpmc build-gpu/hpmc --impl im2col --out acc
    # on the CPU, the full Fashion-MNIST (tf32 is a GPU format):
    python3 bench/accuracy.py --hpmc build-cpu/hpmc --impl cpu --precisions fp32,bf16 --out acc

--runs is CONFIG:EPOCHS,... (configs/CONFIG.yaml; default fashion_mlp:3,
fashion_ae:2, the issue's accuracy targets); --seeds a list (default
1,2,3); --hpmc-args is added to every `hpmc run` (e.g. "--data DIR --set
data.test_limit=2000"). Outputs in --out: accuracy.md (a table per config:
per precision the mean test accuracy and loss, and the mean and the largest
paired difference from fp32) and accuracy.json (every run's figures and
command, the machine). A run that fails is reported with its last line and
left out of the means; the others still run.
"""
import argparse
import csv
import json
import math
import os
import shlex
import shutil
import statistics
import sys
import tempfile

from harness import (PRECISIONS, ROOT, CommandFailed, machine, machine_line, precision_problem,
                     run, write_atomic)


def fail(msg):
    print(f"accuracy.py: error: {msg}", file=sys.stderr)
    sys.exit(2)


def parse_runs(spec):
    """'CONFIG:EPOCHS,...' -> [(config, epochs)]; one line and exit 2 on a bad item."""
    runs = []
    for item in [i.strip() for i in spec.split(",") if i.strip()]:
        cfg, _, epochs = item.partition(":")
        if not epochs.isdigit() or int(epochs) < 1:
            fail(f"--runs {item}: expected CONFIG:EPOCHS with EPOCHS >= 1, e.g. fashion_mlp:3")
        if not os.path.isfile(os.path.join(ROOT, "configs", cfg + ".yaml")):
            fail(f"--runs {item}: there is no configs/{cfg}.yaml")
        runs.append((cfg, int(epochs)))
    if not runs:
        fail("--runs names no config")
    return runs


def last_epoch(metrics_csv):
    """(test loss, test accuracy or None) of the last epoch's row of a run's metrics.csv."""
    with open(metrics_csv) as f:
        rows = [r for r in csv.DictReader(f) if r.get("test_loss")]
    if not rows:
        raise ValueError(f"{metrics_csv} has no epoch with a test loss")
    acc = rows[-1].get("test_accuracy", "")
    acc = float(acc) if acc not in ("", "nan") else None
    return float(rows[-1]["test_loss"]), acc


def mean(xs):
    return statistics.fmean(xs) if xs else None


def worst(xs):
    """The element of largest magnitude."""
    return max(xs, key=abs) if xs else None


def fmt(x, spec, none="-"):
    return none if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hpmc", required=True, help="the hpmc binary")
    ap.add_argument("--impl", default="im2col")
    ap.add_argument("--precisions", default="fp32,tf32,bf16",
                    help="comma separated; fp32 first or added (the reference)")
    ap.add_argument("--runs", default="fashion_mlp:3,fashion_ae:2", help="CONFIG:EPOCHS,...")
    ap.add_argument("--seeds", default="1,2,3", help="training.seed values, comma separated")
    ap.add_argument("--hpmc-args", default="", help="added to every hpmc run command")
    ap.add_argument("--out", required=True, help="folder for accuracy.md and accuracy.json")
    a = ap.parse_args()

    precisions = [p.strip() for p in a.precisions.split(",") if p.strip()]
    if "fp32" not in precisions:
        precisions.insert(0, "fp32")
    if len(set(precisions)) != len(precisions):
        fail(f"--precisions {a.precisions}: give each precision once, e.g. fp32,bf16")
    device = "cpu" if a.impl == "cpu" else "cuda"
    for p in precisions:
        why = precision_problem(p, device, [a.impl])
        if why:
            fail(f"--precisions {p}: {why}")
    try:
        seeds = [int(s) for s in a.seeds.split(",") if s.strip()]
    except ValueError:
        fail(f"--seeds {a.seeds}: expected integers, e.g. 1,2,3")
    if not seeds:
        fail("--seeds names no seed")
    runs = parse_runs(a.runs)
    os.makedirs(a.out, exist_ok=True)

    results, failures = [], []
    work = tempfile.mkdtemp(prefix="hpmc-accuracy-")
    try:
        for cfg, epochs in runs:
            for seed in seeds:
                for p in precisions:
                    d = os.path.join(work, f"{cfg}-{p}-{seed}")
                    cmd = [a.hpmc, "run", f"configs/{cfg}.yaml", "--impl", a.impl, "--precision",
                           p, "--epochs", str(epochs), "--set", f"training.seed={seed}",
                           "--progress", "quiet", "--out", d, "--weights-dir", d]
                    cmd += shlex.split(a.hpmc_args)
                    r = {"config": cfg, "epochs": epochs, "seed": seed, "precision": p,
                         "command": " ".join(shlex.quote(c) for c in cmd)}
                    try:
                        run(cmd)
                        r["test_loss"], r["test_accuracy"] = last_epoch(
                            os.path.join(d, "metrics.csv"))
                        results.append(r)
                    except (CommandFailed, ValueError, OSError) as e:
                        out = getattr(e, "output", "").strip().splitlines()
                        r["error"] = str(e) + (f"; last line: {out[-1]}" if out else "")
                        failures.append(r)
                    shutil.rmtree(d, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    m = machine(device)
    lines = [f"Accuracy of hpmc `--impl {a.impl}` by precision ({machine_line(m, None)}; "
             f"seeds {','.join(map(str, seeds))}; `{' '.join(sys.argv)}`)", ""]
    for cfg, epochs in runs:
        got = {(r["precision"], r["seed"]): r for r in results if r["config"] == cfg}
        classifier = any(r["test_accuracy"] is not None for r in got.values())
        lines += [f"### {cfg}, {epochs} epoch{'s' if epochs > 1 else ''}", ""]
        head = "| precision | runs |"
        if classifier:
            head += " test accuracy (mean) | − fp32, mean (points) | − fp32, largest (points) |"
        head += " test loss (mean) | − fp32, mean | − fp32, largest |"
        lines += [head, "|" + " --- |" * (head.count("|") - 1)]
        for p in precisions:
            mine = [got[(p, s)] for s in seeds if (p, s) in got]
            pairs = [(got[(p, s)], got[("fp32", s)]) for s in seeds
                     if p != "fp32" and (p, s) in got and ("fp32", s) in got]
            row = f"| {p} | {len(mine)} |"
            if classifier:
                accs = [r["test_accuracy"] for r in mine if r["test_accuracy"] is not None]
                dacc = [100 * (x["test_accuracy"] - f["test_accuracy"]) for x, f in pairs
                        if x["test_accuracy"] is not None and f["test_accuracy"] is not None]
                ma = mean(accs)
                row += (f" {fmt(None if ma is None else 100 * ma, '.2f')}% |"
                        f" {fmt(mean(dacc), '+.2f')} | {fmt(worst(dacc), '+.2f')} |")
            dloss = [(x["test_loss"] - f["test_loss"]) / f["test_loss"] * 100 for x, f in pairs
                     if f["test_loss"] != 0]
            row += (f" {fmt(mean([r['test_loss'] for r in mine]), '.5f')} |"
                    f" {fmt(mean(dloss), '+.2f', '-')}{'%' if dloss else ''} |"
                    f" {fmt(worst(dloss), '+.2f', '-')}{'%' if dloss else ''} |")
            lines.append(row)
        lines.append("")
    if failures:
        lines += [f"**Failed ({len(failures)}):**"]
        lines += [f"* {r['config']} {r['precision']} seed {r['seed']}: {r['error']}"
                  for r in failures]
        lines.append("")
    md = "\n".join(lines)
    write_atomic(os.path.join(a.out, "accuracy.md"), md)
    write_atomic(os.path.join(a.out, "accuracy.json"),
                 json.dumps({"machine": m, "command": " ".join(sys.argv), "impl": a.impl,
                             "runs": results, "failed": failures}, indent=1) + "\n")
    print(md)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
