#!/usr/bin/env python3
"""hpmc beside PyTorch on this machine, in one call: runs `hpmc bench` and
bench/pytorch_reference.py one after the other on the same device, with the
same model, batch and data shape, and prints the ratio table.

    # on the lent GPU (PyTorch with CUDA on the python3 that runs this):
    python3 bench/compare.py --hpmc /path/to/hpmc --device cuda --json out.json
    # on the CPU (Debian: /usr/bin/python3 has python3-torch):
    /usr/bin/python3 bench/compare.py --hpmc build/hpmc --device cpu --threads 1,2
    # hpmc in bf16 beside PyTorch's modes and its bf16 ones:
    python3 bench/compare.py --hpmc /path/to/hpmc --device cuda --impls im2col --precision bf16

Each figure is a median of several timed runs after a warm-up (see
--steps/--repeats). The "epoch" column is the epoch-equivalent: the standard
training-set size (50,000 CIFAR images, 60,000 MNIST) divided by images/s.
Ratios are hpmc's epoch time over PyTorch's: below 1 means hpmc is faster.
--json writes every number, the machine and the commands, for bench/plot.py.
--precision fp32|tf32|bf16 is hpmc's (`hpmc bench --precision`); in bf16
PyTorch also runs its bf16 autocast + channels-last mode, with the step in a
CUDA graph on the GPU (bf16clg, the fair comparison), without one on the CPU.
naive and tiled run fp32 only, and tf32 needs the GPU: those are refused in
one line before anything runs.
PyTorch is only a reference here; hpmc never imports it.
"""
import argparse
import json
import os
import sys

from harness import (PRECISIONS, ROOT, SHIPPED, CommandFailed, machine, parse_hpmc_bench,
                     parse_pytorch_reference, precision_problem, run, write_atomic)

MODELS = SHIPPED
PT_MODES = {
    ("cifar_ae", "cuda"): "fp32,default,graph,bf16cl",
    ("mnist_mlp", "cuda"): "fp32,graph",
    ("cifar_ae", "cpu"): "fp32",
    ("mnist_mlp", "cpu"): "fp32",
}
# Added to PT_MODES when hpmc runs in bf16: PyTorch's bf16 beside it.
PT_BF16_MODES = {"cuda": "bf16clg", "cpu": "bf16cl"}
PT_NAMES = {
    "fp32": "PyTorch FP32 (TF32 off)",
    "default": "PyTorch defaults",
    "graph": "PyTorch, CUDA graph",
    "bf16cl": "PyTorch bf16 autocast, channels-last",
    "bf16clg": "PyTorch bf16 autocast, channels-last, CUDA graph",
}


def pt_modes(model, device, precision):
    """PyTorch's modes beside hpmc for a model, device and hpmc precision."""
    modes = PT_MODES[(model, device)].split(",")
    if precision == "bf16" and PT_BF16_MODES[device] not in modes:
        modes.append(PT_BF16_MODES[device])
    return ",".join(modes)


def hpmc_bench(args, model, impl, threads):
    steps, repeats, warmup = MODELS[model]["plan"][args.device]
    cmd = [args.hpmc, "bench", MODELS[model]["config"], "--impl", impl,
           "--precision", args.precision, "--steps", str(steps), "--repeats", str(repeats),
           "--warmup", str(warmup)]
    env = dict(os.environ)
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    out = run(cmd, env)
    try:
        r = parse_hpmc_bench(out)
    except ValueError as e:
        raise SystemExit(f"compare.py: {e}")
    if r["precision"] != args.precision:
        raise SystemExit(f"compare.py: hpmc ran in {r['precision']}, not the --precision "
                         f"{args.precision} asked for: {' '.join(cmd)}")
    name = f"hpmc --impl {impl}" + (f" --precision {args.precision}"
                                    if args.precision != "fp32" else "")
    return {
        "who": "hpmc", "name": name, "impl": impl, "precision": r["precision"], "threads": threads,
        "ms_per_step": r["ms_per_step"], "images_per_s": r["images_per_s"],
        "epoch_s": r["epoch_s"], "tflops": r["tflops"], "peak_frac": r["peak_frac"],
        "path": r["path"], "command": " ".join(cmd), "output": out,
    }


def pytorch_bench(args, model, threads):
    steps, repeats, warmup = MODELS[model]["plan"][args.device]
    m = MODELS[model]
    cmd = [args.python, os.path.join("bench", "pytorch_reference.py"), "--model", model,
           "--device", args.device, "--modes", pt_modes(model, args.device, args.precision),
           "--steps", str(steps), "--repeats", str(repeats), "--warmup", str(warmup),
           "--lr", str(m["lr"]), "--momentum", str(m["momentum"])]
    if threads:
        cmd += ["--threads", str(threads)]
    out = run(cmd)
    rows = []
    for g in parse_pytorch_reference(out):
        name = PT_NAMES.get(g["mode"], g["mode"])
        if args.device == "cpu" and g["mode"] == "fp32":
            name = "PyTorch FP32"  # TF32 is a GPU matter
        rows.append({"who": "pytorch", "mode": g["mode"], "threads": threads, "name": name,
                     "ms_per_step": g["ms_per_step"], "images_per_s": g["images_per_s"],
                     "epoch_s": g["epoch_s"], "command": " ".join(cmd), "line": g["line"]})
    if not rows:
        raise SystemExit("compare.py: no result lines in pytorch_reference.py's output")
    return rows


def fail(msg):
    print(f"compare.py: error: {msg}", file=sys.stderr)
    sys.exit(2)


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
    ap.add_argument("--precision", default="fp32", choices=PRECISIONS,
                    help="hpmc's training.precision (default fp32)")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    args.hpmc = os.path.abspath(args.hpmc)  # the commands run in the repository root
    impls = (args.impls or ("im2col" if args.device == "cuda" else "cpu")).split(",")
    thread_list = [int(t) for t in args.threads.split(",") if t] or [0]
    for model in args.models.split(","):
        if model not in MODELS:
            fail(f"--models {model}: unknown model (known: {', '.join(MODELS)})")
    why = precision_problem(args.precision, args.device, impls)
    if why:
        fail(f"--precision {args.precision}: {why}")

    report = {"machine": machine(args.device), "precision": args.precision, "results": {}}
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
        print(f"\n### {model} ({args.device}, hpmc in {args.precision})\n")
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
