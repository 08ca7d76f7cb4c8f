#!/usr/bin/env python3
"""hpmc beside PyTorch on this machine, in one call: runs `hpmc bench` and
bench/pytorch_reference.py one after the other on the same device, with the
same model, batch and data shape, and prints the ratio table.

    # on the lent GPU (PyTorch with CUDA on the python3 that runs this):
    python3 bench/compare.py --hpmc /path/to/hpmc --device cuda --json out.json
    # on the CPU (Debian: /usr/bin/python3 has python3-torch):
    /usr/bin/python3 bench/compare.py --hpmc build/hpmc --device cpu --threads 1,2

Each figure is a median of several timed runs after a warm-up (see
--steps/--repeats). The "epoch" column is the epoch-equivalent: the standard
training-set size (50,000 CIFAR images, 60,000 MNIST) divided by images/s.
Ratios are hpmc's epoch time over PyTorch's: below 1 means hpmc is faster.
--json writes every number, the machine and the commands, for bench/plot.py.
PyTorch is only a reference here; hpmc never imports it.
"""
import argparse
import json
import os
import re
import sys

from harness import ROOT, CommandFailed, machine, parse_hpmc_bench, run, write_atomic

# The configs' optimizer settings, for PyTorch to train the same way.
MODELS = {
    "cifar_ae": {"config": "configs/cifar_ae.yaml", "lr": 0.01, "momentum": 0.9},
    "mnist_mlp": {"config": "configs/mnist_mlp.yaml", "lr": 0.03, "momentum": 0.0},
}
# (steps, repeats, warmup) per model and device.
PLAN = {
    ("cifar_ae", "cuda"): (50, 5, 10),
    ("mnist_mlp", "cuda"): (300, 5, 30),
    ("cifar_ae", "cpu"): (3, 3, 1),
    ("mnist_mlp", "cpu"): (100, 5, 10),
}
PT_MODES = {
    ("cifar_ae", "cuda"): "fp32,default,graph,bf16cl",
    ("mnist_mlp", "cuda"): "fp32,graph",
    ("cifar_ae", "cpu"): "fp32",
    ("mnist_mlp", "cpu"): "fp32",
}
PT_NAMES = {
    "fp32": "PyTorch FP32 (TF32 off)",
    "default": "PyTorch defaults",
    "graph": "PyTorch, CUDA graph",
    "bf16cl": "PyTorch bf16 autocast, channels-last",
}


def hpmc_bench(args, model, impl, threads):
    steps, repeats, warmup = PLAN[(model, args.device)]
    cmd = [args.hpmc, "bench", MODELS[model]["config"], "--impl", impl, "--steps", str(steps),
           "--repeats", str(repeats), "--warmup", str(warmup)]
    env = dict(os.environ)
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    out = run(cmd, env)
    try:
        r = parse_hpmc_bench(out)
    except ValueError as e:
        raise SystemExit(f"compare.py: {e}")
    return {
        "who": "hpmc", "name": f"hpmc --impl {impl}", "impl": impl, "threads": threads,
        "ms_per_step": r["ms_per_step"], "images_per_s": r["images_per_s"],
        "epoch_s": r["epoch_s"], "tflops": r["tflops"], "peak_frac": r["peak_frac"],
        "path": r["path"], "command": " ".join(cmd), "output": out,
    }


PT_LINE = re.compile(r"pytorch (\S+) (\S+)\s+batch (\d+):\s+([\d.]+) ms/step\s+(\d+) img/s\s+"
                     r"epoch-equivalent\s+([\d.]+) s")


def pytorch_bench(args, model, threads):
    steps, repeats, warmup = PLAN[(model, args.device)]
    m = MODELS[model]
    cmd = [args.python, os.path.join("bench", "pytorch_reference.py"), "--model", model,
           "--device", args.device, "--modes", PT_MODES[(model, args.device)],
           "--steps", str(steps), "--repeats", str(repeats), "--warmup", str(warmup),
           "--lr", str(m["lr"]), "--momentum", str(m["momentum"])]
    if threads:
        cmd += ["--threads", str(threads)]
    out = run(cmd)
    rows = []
    for l in out.splitlines():
        g = PT_LINE.search(l)
        if g:
            name = PT_NAMES.get(g.group(2), g.group(2))
            if args.device == "cpu" and g.group(2) == "fp32":
                name = "PyTorch FP32"  # TF32 is a GPU matter
            rows.append({"who": "pytorch", "mode": g.group(2), "threads": threads, "name": name,
                         "ms_per_step": float(g.group(4)), "images_per_s": float(g.group(5)),
                         "epoch_s": float(g.group(6)), "command": " ".join(cmd), "line": l})
    if not rows:
        raise SystemExit("compare.py: no result lines in pytorch_reference.py's output")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hpmc", default=os.path.join(ROOT, "build", "hpmc"))
    ap.add_argument("--python", default=sys.executable, help="the python with PyTorch")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--models", default="cifar_ae,mnist_mlp")
    ap.add_argument("--impls", default=None,
                    help="hpmc impls (default: im2col on cuda, cpu on cpu)")
    ap.add_argument("--threads", default="",
                    help="CPU: comma-separated thread counts to run both frameworks with")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    args.hpmc = os.path.abspath(args.hpmc)  # the commands run in the repository root
    impls = (args.impls or ("im2col" if args.device == "cuda" else "cpu")).split(",")
    thread_list = [int(t) for t in args.threads.split(",") if t] or [0]

    report = {"machine": machine(args.device), "results": {}}
    for model in args.models.split(","):
        rows = []
        for threads in thread_list:
            for impl in impls:
                rows.append(hpmc_bench(args, model, impl, threads))
            rows.extend(pytorch_bench(args, model, threads))
        report["results"][model] = rows

    for model, rows in report["results"].items():
        pt = [r for r in rows if r["who"] == "pytorch"]
        refs = {}
        for r in pt:  # the best of each mode over thread counts
            if r["mode"] not in refs or r["epoch_s"] < refs[r["mode"]]["epoch_s"]:
                refs[r["mode"]] = r
        print(f"\n### {model} ({args.device})\n")
        cols = list(refs)
        head = "| run | threads | ms/step | images/s | epoch (s) | " + " | ".join(
            f"× {refs[c]['name']}" for c in cols) + " |"
        print(head)
        print("|" + " --- |" * 2 + " ---: |" * (3 + len(cols)))
        for r in rows:
            ratios = " | ".join(f"{r['epoch_s'] / refs[c]['epoch_s']:.2f}" for c in cols)
            print(f"| {r['name']} | {r['threads'] or '-'} | {r['ms_per_step']:.4g} | "
                  f"{r['images_per_s']:,.0f} | {r['epoch_s']:.4g} | {ratios} |")
        for r in rows:
            if r["who"] == "hpmc" and r.get("path"):
                print(f"\n{r['name']} step: {r['path']}")
    if args.json:
        write_atomic(args.json, json.dumps(report, indent=1))
        print(f"\nwrote {args.json}")


if __name__ == "__main__":
    try:
        main()
    except CommandFailed as e:
        sys.stderr.write(e.output[-3000:])
        raise SystemExit(f"compare.py: command failed: {e}")
