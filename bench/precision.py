#!/usr/bin/env python3
"""hpmc's precisions beside PyTorch's modes, in one call: `hpmc bench` of
the shipped CIFAR autoencoder and MNIST MLP in each of --precisions (fp32,
tf32, bf16; synthetic data of the dataset's shape, as `hpmc bench` trains by
default) and bench/pytorch_reference.py's modes of the same models at the
same batches, on one device; one markdown table of ms/step with hpmc's
ratios to one PyTorch mode (--versus: bf16clg, PyTorch's bf16 autocast +
channels-last + CUDA-graph step, on the GPU).

    # on the GPU (scripts/gpu-check device precision):
    python3 bench/precision.py --hpmc build-gpu/hpmc --out precision
    # on the CPU (Debian: /usr/bin/python3 has python3-torch; tf32 is a GPU format):
    /usr/bin/python3 bench/precision.py --hpmc build-cpu/hpmc --device cpu --threads 2 --out /tmp/p

Points (--points, comma separated) are MODEL:BATCH, MODEL one of cifar_ae and
mnist_mlp (configs/ and their optimizer settings); default cifar_ae:64,
cifar_ae:256, mnist_mlp:64. Each figure is the median of --repeats timed
runs after a warm-up, hpmc's and PyTorch's with the same plan (the shipped
models' plan of bench/compare.py). A run that fails (an impl that cannot yet
run a precision, say) leaves its cells "failed" and its reason below the
table; the others still run.

Outputs in --out: precision.md (the table, hpmc's fraction of each
precision's peak and its step strategy, the failures), precision.json (every
number, the commands, the machine) and hpmc-reports.log (every `hpmc bench`
report whole: the per-layer tables with their fractions of the peak).
"""
import argparse
import json
import os
import shlex
import sys

from harness import (GRAPH_MODES, PT_NAMES, ROOT, SHIPPED, CommandFailed, machine,
                     machine_line, parse_hpmc_bench, parse_pytorch_reference,
                     precision_problem, run, write_atomic)


def fail(msg):
    print(f"precision.py: error: {msg}", file=sys.stderr)
    sys.exit(2)


def parse_points(spec):
    """'MODEL:BATCH,...' -> [(model, batch)]; one line and exit 2 on a bad item."""
    points = []
    for item in [i.strip() for i in spec.split(",") if i.strip()]:
        model, _, batch = item.partition(":")
        if model not in SHIPPED or not batch.isdigit() or int(batch) < 1:
            fail(f"--points {item}: expected MODEL:BATCH with MODEL one of "
                 f"{', '.join(SHIPPED)} and a positive batch, e.g. cifar_ae:64")
        points.append((model, int(batch)))
    if not points:
        fail("--points: no point given")
    return points


def plan(args, model):
    steps, repeats, warmup = SHIPPED[model]["plan"][args.device]
    return (args.steps or steps, args.repeats or repeats,
            args.warmup if args.warmup is not None else warmup)


def time_hpmc(args, model, batch, precision, env):
    steps, repeats, warmup = plan(args, model)
    cmd = [args.hpmc, "bench", SHIPPED[model]["config"], "--impl", args.impl, "--precision",
           precision, "--batch", str(batch), "--steps", str(steps), "--repeats", str(repeats),
           "--warmup", str(warmup)]
    r = {"command": " ".join(cmd)}
    try:
        out = run(cmd, env)
    except CommandFailed as e:
        tail = [l for l in e.output.splitlines() if l.strip()][-1:] or [""]
        r.update(error=f"{e}; last line: {tail[0][:300]}", output=e.output[-4000:])
        return r
    r["output"] = out
    try:
        r.update(parse_hpmc_bench(out))
    except ValueError as e:
        r["error"] = str(e)
        return r
    if r["precision"] != precision:
        r["error"] = f"hpmc ran in {r['precision']}, not {precision}"
    return r


def time_pytorch(args, model, batch):
    """{mode: {ms_per_step, ...} or {error}} for every mode of --modes."""
    steps, repeats, warmup = plan(args, model)
    m = SHIPPED[model]
    cmd = [args.python, os.path.join("bench", "pytorch_reference.py"), "--model", model,
           "--device", args.device, "--modes", ",".join(args.modes), "--batch", str(batch),
           "--steps", str(steps), "--repeats", str(repeats), "--warmup", str(warmup),
           "--lr", str(m["lr"]), "--momentum", str(m["momentum"])]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    try:
        out = run(cmd)
    except CommandFailed as e:
        tail = [l for l in e.output.splitlines() if l.strip()][-1:] or [""]
        return {md: {"error": f"{e}; last line: {tail[0][:300]}"} for md in args.modes}
    rows = {r["mode"]: dict(r, command=" ".join(cmd)) for r in parse_pytorch_reference(out)}
    return {md: rows.get(md, {"error": "no result line in pytorch_reference.py's output"})
            for md in args.modes}


def ms(r):
    return f"{r['ms_per_step']:.4g}" if "ms_per_step" in r else "failed"


def markdown(report):
    s, m = report["settings"], report["machine"]
    first = machine_line(m, s["threads"])
    first += f"; hpmc `--impl {s['impl']}`; ms/step, medians; `{report['command']}`"
    vs = s["versus"]
    head = ["model", "batch"] + [f"hpmc {p} ms" for p in s["precisions"]]
    head += [f"{PT_NAMES.get(md, md)} ms" for md in s["modes"]]
    head += [f"hpmc {p} × {vs}" for p in s["precisions"]]
    lines = [first, "", "| " + " | ".join(head) + " |",
             "| --- |" + " ---: |" * (len(head) - 1)]
    for pt in report["points"]:
        cells = [pt["model"], str(pt["batch"])]
        cells += [ms(pt["hpmc"][p]) for p in s["precisions"]]
        cells += [ms(pt["pytorch"][md]) for md in s["modes"]]
        ref = pt["pytorch"].get(vs, {}).get("ms_per_step")
        for p in s["precisions"]:
            h = pt["hpmc"][p].get("ms_per_step")
            cells.append(f"{h / ref:.2f}" if h and ref else "-")
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"× {vs}: hpmc's ms/step over {PT_NAMES.get(vs, vs)}'s (below 1: hpmc "
                  "faster). PyTorch FP32 runs with TF32 off; its defaults let cuDNN use TF32."]
    lines += ["", "hpmc's fraction of the precision's peak, and its step:"]
    for pt in report["points"]:
        for p in s["precisions"]:
            h = pt["hpmc"][p]
            if "ms_per_step" in h:
                frac = f"{100 * h['peak_frac']:.1f}%" if h.get("peak_frac") is not None else "-"
                lines.append(f"* {pt['model']} batch {pt['batch']} {p}: {frac} of the peak; "
                             f"step: {h.get('path') or '-'}")
    failed = []
    for pt in report["points"]:
        for p in s["precisions"]:
            if "error" in pt["hpmc"][p]:
                failed.append(f"* {pt['model']} batch {pt['batch']} hpmc {p}: "
                              f"{pt['hpmc'][p]['error']}")
        for md in s["modes"]:
            if "error" in pt["pytorch"][md]:
                failed.append(f"* {pt['model']} batch {pt['batch']} {PT_NAMES.get(md, md)}: "
                              f"{pt['pytorch'][md]['error']}")
    if failed:
        lines += ["", f"**Failed ({len(failed)}):**"] + failed
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--hpmc", default=os.path.join(ROOT, "build", "hpmc"))
    ap.add_argument("--python", default=sys.executable, help="the python with PyTorch")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--impl", default=None, help="hpmc's --impl (default im2col on cuda, cpu on cpu)")
    ap.add_argument("--precisions", default=None,
                    help="hpmc's precisions (default fp32,tf32,bf16 on cuda, fp32,bf16 on cpu)")
    ap.add_argument("--modes", default=None, help="PyTorch modes (default fp32,default,graph,"
                                                  "bf16clg on cuda, fp32,bf16cl on cpu)")
    ap.add_argument("--versus", default=None,
                    help="the PyTorch mode of the ratios (default bf16clg on cuda, bf16cl on cpu)")
    ap.add_argument("--points", default="cifar_ae:64,cifar_ae:256,mnist_mlp:64")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads for both frameworks")
    ap.add_argument("--steps", type=int, default=0, help="steps per timed run (default: per model)")
    ap.add_argument("--repeats", type=int, default=0, help="timed runs (default: per model)")
    ap.add_argument("--warmup", type=int, default=None, help="warm-up steps (default: per model)")
    ap.add_argument("--out", default="precision-out", help="directory for precision.md and .json")
    args = ap.parse_args()
    cuda = args.device == "cuda"
    args.impl = args.impl or ("im2col" if cuda else "cpu")
    args.precisions = (args.precisions or ("fp32,tf32,bf16" if cuda else "fp32,bf16")).split(",")
    args.modes = (args.modes or ("fp32,default,graph,bf16clg" if cuda else "fp32,bf16cl")).split(",")
    args.versus = args.versus or ("bf16clg" if cuda else "bf16cl")
    points = parse_points(args.points)
    for p in args.precisions:
        why = precision_problem(p, args.device, [args.impl])
        if why:
            fail(f"--precisions {p}: {why}")
    for md in args.modes:
        if md not in PT_NAMES:
            fail(f"--modes {md}: unknown mode (known: {', '.join(PT_NAMES)})")
        if md in GRAPH_MODES and not cuda:
            fail(f"--modes {md}: CUDA graphs need --device cuda")
    if args.versus not in args.modes:
        fail(f"--versus {args.versus}: not among --modes {','.join(args.modes)}")
    for name in ("steps", "repeats", "threads"):
        if getattr(args, name) < 0:
            fail(f"--{name} {getattr(args, name)}: must not be negative")
    args.hpmc = os.path.abspath(args.hpmc)
    if not os.access(args.hpmc, os.X_OK):
        fail(f"--hpmc {args.hpmc}: no executable there (build hpmc first, or give its path)")

    env = dict(os.environ)
    if args.threads:
        env["OMP_NUM_THREADS"] = str(args.threads)
    os.makedirs(args.out, exist_ok=True)
    report = {"machine": machine(args.device),
              "command": shlex.join([os.path.basename(sys.executable)] + sys.argv),
              "settings": {"impl": args.impl, "precisions": args.precisions, "modes": args.modes,
                           "versus": args.versus, "threads": args.threads},
              "points": []}
    logs = []
    for model, batch in points:
        pt = {"model": model, "batch": batch, "pytorch": time_pytorch(args, model, batch),
              "hpmc": {}}
        for p in args.precisions:
            r = pt["hpmc"][p] = time_hpmc(args, model, batch, p, env)
            logs.append(f"=== {model} batch {batch} {p}: {r['command']}\n{r.get('output', '')}")
            print(f"{model} batch {batch} hpmc {p}: "
                  + (f"{r['ms_per_step']:.4g} ms" if "ms_per_step" in r else r["error"]),
                  flush=True)
        report["points"].append(pt)
    md = markdown(report)
    write_atomic(os.path.join(args.out, "precision.json"), json.dumps(report, indent=1))
    write_atomic(os.path.join(args.out, "hpmc-reports.log"), "\n".join(logs))
    write_atomic(os.path.join(args.out, "precision.md"), md)
    print("\n" + md)
    print(f"wrote {os.path.join(args.out, 'precision.md')}, precision.json and hpmc-reports.log")


if __name__ == "__main__":
    main()
