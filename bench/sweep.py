#!/usr/bin/env python3
"""hpmc beside PyTorch across model sizes and batches, in one call: MLPs of
several widths and depths and the CIFAR autoencoder at several channel widths
and kernel sizes, each at several batches, timed in both frameworks on the
same device; a table, a JSON and a chart of hpmc's step time over PyTorch's
against the work of a step.

    # on the GPU (the python3 there has PyTorch with CUDA); about 4 minutes on an H200:
    python3 bench/sweep.py --hpmc build-gpu/hpmc --out sweep
    # on the CPU, a tiny grid (Debian: /usr/bin/python3 has python3-torch):
    /usr/bin/python3 bench/sweep.py --hpmc build/hpmc --device cpu --quick --out /tmp/sweep
    python3 bench/sweep.py --list                       # the grid's points
    python3 bench/sweep.py --points 'mlp-4096x2-*,ae-x2-*' --hpmc ... --out ...
    python3 bench/plot.py sweep/sweep.json -o sweep.png   # the chart, later
    python3 bench/sweep.py --hpmc build-gpu/hpmc --precision bf16 --out sweep-bf16
    python3 bench/sweep.py --hpmc build-gpu/hpmc --precisions fp32,bf16 --quick --out sweep

Points are named mlp-<width>x<hidden layers>-b<batch> (784 inputs, ReLU, 10
classes, softmax cross-entropy, as configs/mnist_mlp.yaml) and
ae-x<scale>-k<kernel>-b<batch> (configs/cifar_ae.yaml with its channels
256/128/128/256 times the scale and square kernels of that size, MSE). For
each point hpmc gets a generated config (in a temporary directory) and runs
`hpmc bench CONFIG --impl im2col --batch B` on synthetic data of the format's
shape; PyTorch runs the same model (bench/pytorch_reference.py) in each mode
of --modes: FP32 with TF32 off, its defaults, and the default step captured
in a CUDA graph; in bf16 also bf16 autocast + channels-last with the step in
a CUDA graph (bf16clg). Both train with plain SGD at lr 0.001 (momentum 0.9 for the
autoencoders, as their config): a step's work does not depend on the rate,
and a low one keeps every size from diverging on random data.

Timing: PyTorch goes first. A mode's first steps give an estimate of its step
time, from which its warm-up and the length of its timed runs follow
(--run-ms each, --repeats runs, the median); hpmc's plan is made the same way
from the fastest PyTorch mode's time. Each framework has --point-budget-s at
a point (hpmc is stopped there; a PyTorch mode that would run past it is not
timed), and no point starts after --budget-s: the run fits one call of a lent
GPU. Points run from the least work to the most, so that a cut loses the
largest. A point whose memory estimate exceeds the device's free memory (or
--memory-gb) is skipped, and said so.

--variant NAME:ITEM[,ITEM...] (repeatable) times hpmc once more at each point
with those environment variables (VAR=VALUE) and config overrides
(--set=KEY=VALUE), e.g. `--variant layers:HPMC_STEP=layers` (never the
fused MLP step) or `--variant nofold:--set=training.fold_upsample=false`:
the A/B data behind hpmc's choice rules. The
variants get a column each ("hpmc NAME ms"); the targets judge hpmc's default
only. `--modes none` times no PyTorch mode (hpmc's plans then come from the
work at 10 TFLOP/s).

Outputs in --out: sweep.md (the table, the points that miss the targets and
those not measured), sweep.json (every number, the plans, hpmc's reports, the
machine and the command; rewritten after each point) and sweep.png (made
with bench/plot.py where matplotlib is installed; else the command to make it
later). The targets depend on --precision, hpmc's training.precision (fp32,
tf32 or bf16, passed to every `hpmc bench`):
  fp32  hpmc at most 1.0x PyTorch FP32 at every point, and at most 0.5x
        PyTorch's CUDA-graph step where that step is under --launch-bound-ms
        (PyTorch is launch-bound there);
  tf32  the same with PyTorch's defaults (cuDNN's TF32) in place of its FP32;
  bf16  hpmc at most 0.8x PyTorch's bf16 + channels-last + CUDA-graph step
        (bf16clg) at every point.
--precisions fp32,bf16 runs the sweep once per precision (each with its own
--budget-s) into --out/<precision>/ and writes --out/sweep.md with a section
for each (also for one precision: --precisions fp32).
"""
import argparse
import copy
import fnmatch
import json
import os
import re
import shlex
import statistics
import sys
import tempfile
import time

from harness import (GRAPH_MODES, PRECISIONS, PT_NAMES, ROOT, CommandFailed, machine,
                     machine_line, parse_hpmc_bench, precision_problem, run, write_atomic)
# The targets of each precision: (PyTorch mode, hpmc's step at most this times
# that mode's, only where that mode's step is launch-bound: under --launch-bound-ms).
TARGETS = {
    "fp32": (("fp32", 1.0, False), ("graph", 0.5, True)),
    "tf32": (("default", 1.0, False), ("graph", 0.5, True)),
    "bf16": (("bf16clg", 0.8, False),),
}
# PyTorch's modes by default on the GPU (on the CPU: fp32, and bf16cl in bf16).
DEFAULT_MODES = {"fp32": "fp32,default,graph", "tf32": "fp32,default,graph",
                 "bf16": "fp32,default,graph,bf16clg"}
LR = 0.001
AE_CHANNELS = (256, 128, 128, 256)  # configs/cifar_ae.yaml's conv1..conv4

# The grid: every MLP width at every depth and batch; every AE variant at
# every batch. About 4 minutes on an H200 (of --budget-s 360).
MLP_WIDTHS = (128, 512, 1024, 2048, 4096, 8192)
MLP_DEPTHS = (1, 2, 4)
MLP_BATCHES = (16, 64, 256, 1024, 4096)
AE_VARIANTS = ((0.25, 3), (0.5, 3), (1, 3), (2, 3), (1, 5))  # (channel scale, kernel)
AE_BATCHES = (16, 64, 256, 512)
QUICK = ("mlp-128x1-b16", "mlp-512x2-b64", "ae-x0.25-k3-b16")

POINT_ID = re.compile(r"^(?:mlp-(\d+)x(\d+)|ae-x([\d.]+)-k(\d+))-b(\d+)$")


def fail(msg):
    print(f"sweep.py: error: {msg}", file=sys.stderr)
    sys.exit(2)


# ---------------------------------------------------------------- points

def mlp_point(width, depth, batch):
    return {"id": f"mlp-{width}x{depth}-b{batch}", "model": f"mlp-{width}x{depth}",
            "family": "mlp", "width": width, "depth": depth, "batch": batch}


def ae_point(scale, kernel, batch):
    return {"id": f"ae-x{scale:g}-k{kernel}-b{batch}", "model": f"ae-x{scale:g}-k{kernel}",
            "family": "ae", "scale": scale, "kernel": kernel, "batch": batch}


def grid():
    pts = [mlp_point(w, d, b) for d in MLP_DEPTHS for w in MLP_WIDTHS for b in MLP_BATCHES]
    pts += [ae_point(s, k, b) for s, k in AE_VARIANTS for b in AE_BATCHES]
    return pts


def parse_point(pid):
    """The point an id names, or None if it names none."""
    m = POINT_ID.match(pid)
    if not m:
        return None
    w, d, s, k, b = m.groups()
    if w:
        return mlp_point(int(w), int(d), int(b)) if int(w) > 0 and 1 <= int(d) <= 8 and int(b) > 0 \
            else None
    try:
        scale = float(s)
    except ValueError:  # "0.5.5"
        return None
    if not (int(128 * scale) == 128 * scale and scale > 0 and int(k) % 2 == 1 and int(b) > 0):
        return None  # the channels must come out whole; an odd kernel keeps the size
    return ae_point(int(scale) if scale.is_integer() else scale, int(k), int(b))


def select(points, spec):
    """The points --points names: each comma-separated item is a glob over the
    grid's ids or the id of a point to add."""
    chosen, seen = [], set()
    for item in [i.strip() for i in spec.split(",") if i.strip()]:
        hits = [p for p in points if fnmatch.fnmatchcase(p["id"], item)]
        if not hits and not any(c in item for c in "*?["):
            p = parse_point(item)
            hits = [p] if p else []
        if not hits:
            fail(f"--points {item}: matches no point of the grid and names none (ids look like "
                 f"mlp-1024x2-b256 or ae-x0.5-k3-b64; --list prints the grid)")
        for p in hits:
            if p["id"] not in seen:
                seen.add(p["id"])
                chosen.append(p)
    return chosen


def layers(point):
    """The model's layers as (kind, in, out, spatial size, kernel): linear
    and conv layers carry their multiply-adds; the rest only their outputs
    (for the memory estimate)."""
    out = []
    if point["family"] == "mlp":
        n = 784
        for i in range(point["depth"]):
            out += [("linear", n, point["width"], 1, 1), ("relu", point["width"], point["width"], 1, 1)]
            n = point["width"]
        return out + [("linear", n, 10, 1, 1)]
    c1, c2, c3, c4 = (int(c * point["scale"]) for c in AE_CHANNELS)
    k = point["kernel"]
    return [("conv", 3, c1, 32, k), ("relu", c1, c1, 32, 1), ("pool", c1, c1, 16, 1),
            ("conv", c1, c2, 16, k), ("relu", c2, c2, 16, 1), ("pool", c2, c2, 8, 1),
            ("conv", c2, c3, 8, k), ("relu", c3, c3, 8, 1), ("up", c3, c3, 16, 1),
            ("conv", c3, c4, 16, k), ("relu", c4, c4, 16, 1), ("up", c4, c4, 32, 1),
            ("conv", c4, 3, 32, k)]


def work_flops(point):
    """A training step's matrix-product FLOPs (2 per multiply-add), as hpmc
    counts them for the unfused model: every linear and conv layer's forward
    and weight gradient, and its input gradient but for the first one's."""
    total, first = 0.0, True
    for kind, cin, cout, hw, k in layers(point):
        if kind in ("linear", "conv"):
            macs = point["batch"] * cin * cout * hw * hw * k * k
            total += 2 * macs * (2 if first else 3)
            first = False
    return total


def memory_bytes(point):
    """A generous estimate of one framework's memory for a point: weights,
    their gradients and momentum; every layer's output and its gradient
    twice over (a CUDA graph keeps a pool of its own); 8 input batches; the
    synthetic training set (uint8) on the device; 0.5 GB for the rest."""
    params = sum(cin * cout * k * k + cout for kind, cin, cout, hw, k in layers(point)
                 if kind in ("linear", "conv"))
    acts = sum(cout * hw * hw for _, _, cout, hw, _ in layers(point))
    sample = 784 if point["family"] == "mlp" else 3 * 32 * 32
    dataset = 60000 * 784 if point["family"] == "mlp" else 50000 * 3 * 32 * 32
    b = point["batch"]
    return 4 * (3 * params + 4 * acts * b + 8 * sample * b) + dataset + 0.5e9


def config_yaml(point):
    """An hpmc config for the point's model (the batch comes from --batch)."""
    if point["family"] == "mlp":
        lines = [f"# bench/sweep.py: {point['depth']} hidden layer(s) of {point['width']}, "
                 "784 inputs, 10 classes", f"name: {point['model']}",
                 "data: {format: mnist, path: synthetic}",
                 "model:", "  loss: softmax_cross_entropy", "  layers:",
                 "    - {name: flatten, type: flatten}"]
        for i in range(point["depth"]):
            lines += [f"    - {{name: fc{i + 1}, type: linear, out_features: {point['width']}}}",
                      f"    - {{name: relu{i + 1}, type: relu}}"]
        lines.append(f"    - {{name: fc{point['depth'] + 1}, type: linear, out_features: 10}}")
        momentum = 0.0
    else:
        lines = [f"# bench/sweep.py: configs/cifar_ae.yaml with channels x{point['scale']:g}, "
                 f"{point['kernel']}x{point['kernel']} kernels", f"name: {point['model']}",
                 "data: {format: cifar10, path: synthetic}", "model:", "  loss: mse", "  layers:"]
        pad, k = point["kernel"] // 2, point["kernel"]
        convs = [int(c * point["scale"]) for c in AE_CHANNELS] + [3]
        after = ["pool", "pool", "up", "up", None]
        for i, (c, a) in enumerate(zip(convs, after), 1):
            lines.append(f"    - {{name: conv{i}, type: conv2d, out_channels: {c}, kernel: {k}, "
                         f"padding: {pad}}}")
            if a:
                lines.append(f"    - {{name: relu{i}, type: relu}}")
                lines.append(f"    - {{name: {a}{i}, type: maxpool2d, kernel: 2}}" if a == "pool"
                             else f"    - {{name: {a}{i}, type: upsample2d, scale: 2}}")
        momentum = 0.9
    lines += ["training:", "  epochs: 1", "  batch_size: 64", f"  lr: {LR}",
              f"  momentum: {momentum}", "  seed: 1", "  shuffle: true"]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- timing

def plan_for(est_ms, args):
    """(warm-up steps, steps per timed run) for a step of about est_ms."""
    est = max(est_ms, 0.005)
    steps = int(min(10000, max(1, round(args.run_ms / est))))
    warm = int(min(2000, max(2, round(args.run_ms / 2 / est))))
    return warm, steps


def time_pytorch(ref, point, mode, args, deadline):
    """One PyTorch mode at a point: {ms, runs, plan} or {error}."""
    import torch
    dev = args.device
    if point["family"] == "mlp":
        build = lambda: ref.mlp([point["width"]] * point["depth"])  # noqa: E731
        shape, loss, momentum = (1, 28, 28), "ce", 0.0
    else:
        channels = [int(c * point["scale"]) for c in AE_CHANNELS]
        build = lambda: ref.conv_ae(channels, point["kernel"])  # noqa: E731
        shape, loss, momentum = (3, 32, 32), "mse", 0.9
    step = None
    try:
        step = ref.training_step(build, shape, loss, mode, point["batch"], dev, LR, momentum)
        step(0)  # the first step sets up kernels and workspaces
        est = ref.time_steps(step, dev, 1, 1, first=1)[0]
        warm, _ = plan_for(est * 1e3, args)
        left = deadline - time.perf_counter()
        if est * (warm + args.repeats) > left:
            return {"error": f"a step takes {est * 1e3:.1f} ms: warm-up and {args.repeats} "
                             f"runs would pass the point's budget (--point-budget-s "
                             f"{args.point_budget_s:g})"}
        est = ref.time_steps(step, dev, warm, 1, first=2)[0]  # the warm-up, timed
        _, steps = plan_for(est * 1e3, args)
        left = deadline - time.perf_counter()
        steps = max(1, min(steps, int(left / max(est, 1e-9) / args.repeats * 0.9)))
        runs = ref.time_steps(step, dev, steps, args.repeats, first=2 + warm)
        return {"ms": statistics.median(runs) * 1e3, "runs_ms": [t * 1e3 for t in runs],
                "plan": {"warmup": warm + 2, "steps": steps, "repeats": args.repeats}}
    except (RuntimeError, AssertionError) as e:  # out of memory, an unsupported mode
        return {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"}
    finally:
        del step
        if dev == "cuda":
            torch.cuda.synchronize()
            torch.cuda.empty_cache()


def parse_variant(text):
    """'NAME:ITEM,ITEM...' -> (name, {VAR: VALUE}, [hpmc args]); an ITEM is VAR=VALUE (an
    environment variable) or --set=KEY=VALUE (a config override)."""
    name, sep, spec = text.partition(":")
    if not sep or not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        fail(f"--variant {text!r}: expected NAME:VAR=VALUE[,...] or NAME:--set=KEY=VALUE[,...], "
             "e.g. layers:HPMC_STEP=layers")
    env, extra = {}, []
    for item in filter(None, spec.split(",")):
        if item.startswith("--set="):
            if "=" not in item[6:]:
                fail(f"--variant {text!r}: {item!r} is not --set=KEY=VALUE")
            extra += ["--set", item[6:]]
            continue
        var, eq, value = item.partition("=")
        if not eq or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", var):
            fail(f"--variant {text!r}: {item!r} is neither VAR=VALUE nor --set=KEY=VALUE")
        env[var] = value
    if not env and not extra:
        fail(f"--variant {text!r}: nothing after the name")
    return name, env, extra


def time_hpmc(point, cfg_path, est_ms, args, env, extra=()):
    warm, steps = plan_for(est_ms, args)
    cmd = [args.hpmc, "bench", cfg_path, "--impl", args.impl, "--precision", args.precision,
           "--batch", str(point["batch"]), "--warmup", str(warm), "--steps", str(steps),
           "--repeats", str(args.repeats), *extra]
    r = {"command": " ".join(cmd), "plan": {"warmup": warm, "steps": steps,
                                            "repeats": args.repeats}}
    try:
        out = run(cmd, env, timeout=args.point_budget_s)
    except CommandFailed as e:
        tail = [l for l in e.output.splitlines() if l.strip()][-1:] or [""]
        r.update(error=f"{e}; last line: {tail[0][:300]}", output=e.output[-4000:])
        return r
    try:
        r.update(parse_hpmc_bench(out))
    except ValueError as e:
        r.update(error=str(e))
    else:
        if r["precision"] != args.precision:
            r.update(error=f"hpmc ran in {r['precision']}, not the --precision {args.precision} "
                           "asked for")
            del r["ms_per_step"]  # not a time of this sweep's precision
    r["output"] = out
    return r


# ---------------------------------------------------------------- report

def judge(p, args):
    """Ratios and the verdicts of the precision's targets (TARGETS) of a
    measured point (in place)."""
    h = p.get("hpmc", {}).get("ms_per_step")
    pt = {m: r["ms"] for m, r in p.get("pytorch", {}).items() if "ms" in r}
    p["ratios"] = {m: h / ms for m, ms in pt.items()} if h else {}
    misses = []
    p["launch_bound"] = "graph" in pt and pt["graph"] < args.launch_bound_ms
    for mode, most, launch_bound_only in TARGETS[args.precision]:
        if not h or mode not in pt or h <= most * pt[mode]:
            continue
        if not launch_bound_only:
            misses.append(f"{h / pt[mode]:.2f}x {PT_NAMES[mode]} (target at most {most:.1f}x)")
        elif pt[mode] < args.launch_bound_ms:
            misses.append(f"{h / pt[mode]:.2f}x {PT_NAMES[mode]}'s step of {pt[mode]:.3g} ms, "
                          f"which is under {args.launch_bound_ms:g} ms (target at most {most:.1f}x)")
    p["misses"] = misses


def targets_text(precision, launch_bound_ms):
    """The precision's targets in words, for the table's notes."""
    parts = []
    for mode, most, launch_bound_only in TARGETS[precision]:
        if launch_bound_only:
            parts.append(f"where {PT_NAMES[mode]}'s step is under {launch_bound_ms:g} ms, at most "
                         f"{most:.1f}× that step")
        else:
            parts.append(f"hpmc at most {most:.1f}× {PT_NAMES[mode]} everywhere")
    return f"Targets ({precision}): " + "; ".join(parts) + "."


def short_step(path):
    """'fused' or 'layer by layer' from hpmc's step line."""
    return path.split(":", 1)[0] if path else "-"


def markdown(report):
    args = report["settings"]
    modes = args["modes"]
    m = report["machine"]
    first = machine_line(m, args["threads"])
    first += (f"; hpmc `--impl {args['impl']} --precision {args['precision']}`; medians of "
              f"{args['repeats']} runs; `{report['command']}`")
    lines = [first, ""]
    variants = [v["name"] for v in args.get("variants", [])]
    head = ["point", "GFLOP/step", "hpmc ms", "hpmc step", "hpmc % peak"]
    head += [f"hpmc {v} ms" for v in variants]
    head += [f"{PT_NAMES.get(md, md)} ms" for md in modes] + [f"× {PT_NAMES.get(md, md)}"
                                                            for md in modes] + ["targets"]
    text = {"point", "hpmc step", "targets"}
    lines += ["| " + " | ".join(head) + " |",
              "|" + "".join(" --- |" if c in text else " ---: |" for c in head)]
    # The table in grid order (the run goes by work).
    order = {pid: i for i, pid in enumerate(report["grid_order"])}
    measured = [p for p in report["points"] if "hpmc" in p or "pytorch" in p]
    for p in sorted(measured, key=lambda p: order.get(p["id"], len(order))):
        h = p.get("hpmc", {})
        cells = [p["id"], f"{p['work_flops'] / 1e9:.4g}",
                 f"{h['ms_per_step']:.4g}" if "ms_per_step" in h else "failed",
                 short_step(h.get("path", "")),
                 f"{100 * h['peak_frac']:.1f}" if h.get("peak_frac") is not None else "-"]
        for v in variants:
            r = p.get("variants", {}).get(v, {})
            cells.append(f"{r['ms_per_step']:.4g}" if "ms_per_step" in r else
                         ("failed" if r else "-"))
        for md in modes:
            r = p.get("pytorch", {}).get(md, {})
            cells.append(f"{r['ms']:.4g}" if "ms" in r else "-")
        for md in modes:
            ratio = p.get("ratios", {}).get(md)
            cells.append(f"{ratio:.2f}" if ratio is not None else "-")
        judged = {t[0] for t in TARGETS[args["precision"]]} & set(p.get("ratios", {}))
        cells.append("**missed**" if p.get("misses") else
                     ("met" if "ms_per_step" in h and judged else "-"))
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", targets_text(args["precision"], args["launch_bound_ms"]) +
              " % peak: hpmc's FLOP/s (its count: with the upsample fold on the GPU, what "
              f"runs) over the device's {args['precision']} peak."]
    for v in args.get("variants", []):
        how = [f"`{k}={val}`" for k, val in v["env"].items()]
        how += [f"`--set {a}`" for a in v.get("args", [])[1::2]]
        lines.append(f"hpmc {v['name']}: hpmc run with " + " ".join(how)
                     + " (not judged against the targets).")
    missed = [p for p in report["points"] if p.get("misses")]
    judged = [t[0] for t in TARGETS[args["precision"]]]
    if not modes:
        lines += ["", "**No PyTorch mode was timed (--modes none): no target is judged.**"]
    elif not set(judged) & set(modes):
        lines += ["", f"**No target is judged: its PyTorch mode{'s' if len(judged) > 1 else ''} "
                      f"({', '.join(judged)}) {'were' if len(judged) > 1 else 'was'} not timed.**"]
    else:
        lines += ["", f"**Points that miss the targets ({len(missed)}):**" if missed
                  else "**Every measured point meets the targets.**"]
    for p in sorted(missed, key=lambda p: order.get(p["id"], len(order))):
        h = p["hpmc"]["ms_per_step"]
        lines.append(f"* {p['id']} (hpmc {h:.4g} ms, {short_step(p['hpmc'].get('path', ''))}): "
                     + "; ".join(p["misses"]))
    incomplete = []
    for p in report["points"]:
        why = [p["skipped"]] if "skipped" in p else []
        if "hpmc" in p and "error" in p["hpmc"]:
            why.append(f"hpmc: {p['hpmc']['error']}")
        for v, r in p.get("variants", {}).items():
            if "error" in r:
                why.append(f"hpmc {v}: {r['error']}")
        for md, r in p.get("pytorch", {}).items():
            if "error" in r:
                why.append(f"{PT_NAMES.get(md, md)}: {r['error']}")
        if why:
            incomplete.append(f"* {p['id']}: " + "; ".join(why))
    if incomplete:
        lines += ["", f"**Not measured or incomplete ({len(incomplete)}):**"] + incomplete
    # The step lines, numbers masked, with how many points said each.
    steps = {}
    for p in report["points"]:
        path = p.get("hpmc", {}).get("path")
        if path:
            key = re.sub(r"\b\d+(?:\.\d+)?(?:e[+-]?\d+)?\b", "N", path)
            steps[key] = steps.get(key, 0) + 1
    if steps:
        lines += ["", "hpmc's step strategies (numbers masked as N): " +
                  "; ".join(f"\"{s}\" ({n} point{'s' if n > 1 else ''})"
                            for s, n in sorted(steps.items())) + "."]
    return "\n".join(lines) + "\n"


def write_outputs(report, out_dir, final):
    write_atomic(os.path.join(out_dir, "sweep.json"), json.dumps(report, indent=1))
    md = markdown(report)
    write_atomic(os.path.join(out_dir, "sweep.md"), md)
    if not final:
        return md
    png = os.path.join(out_dir, "sweep.png")
    try:
        import plot  # bench/plot.py; needs matplotlib
    except ImportError as e:
        print(f"sweep.py: no chart ({e}); make it where matplotlib is installed: "
              f"python3 bench/plot.py {os.path.join(out_dir, 'sweep.json')} -o {png}",
              file=sys.stderr)
    else:
        plot.plot_sweep(report, png)
    return md


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--hpmc", default=os.path.join(ROOT, "build", "hpmc"))
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--impl", default=None, help="hpmc's --impl (default im2col on cuda, cpu on cpu)")
    ap.add_argument("--modes", default=None,
                    help="PyTorch modes (default fp32,default,graph on cuda, and bf16clg in bf16; "
                         "fp32 on cpu, and bf16cl in bf16)")
    ap.add_argument("--precision", default=None, choices=PRECISIONS,
                    help="hpmc's training.precision, and the targets judged (default fp32)")
    ap.add_argument("--precisions", default=None, metavar="P,P...",
                    help="one sweep per precision into --out/<precision>/; --out/sweep.md holds "
                         "a section for each")
    ap.add_argument("--out", default="sweep-out", help="directory for sweep.md, .json and .png")
    ap.add_argument("--quick", action="store_true", help="a tiny grid: " + ", ".join(QUICK))
    ap.add_argument("--points", default="",
                    help="comma-separated globs over the grid's ids, or ids of points to add")
    ap.add_argument("--list", action="store_true", help="print the chosen points and exit")
    ap.add_argument("--repeats", type=int, default=5, help="timed runs per measurement (median)")
    ap.add_argument("--run-ms", type=float, default=None,
                    help="length of a timed run (default 40 ms on cuda, 30 on cpu)")
    ap.add_argument("--point-budget-s", type=float, default=30,
                    help="the most time each framework may take at one point")
    ap.add_argument("--budget-s", type=float, default=360,
                    help="start no point after this many seconds")
    ap.add_argument("--memory-gb", type=float, default=None,
                    help="skip points whose memory estimate exceeds this (default: the device's "
                         "free memory at the start)")
    ap.add_argument("--launch-bound-ms", type=float, default=0.3,
                    help="PyTorch CUDA-graph steps under this are launch-bound (target 0.5x)")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads for both frameworks")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME:ITEM,...",
                    help="also time hpmc with these environment variables (VAR=VALUE) and "
                         "config overrides (--set=KEY=VALUE); repeatable")
    args = ap.parse_args()
    args.impl = args.impl or ("im2col" if args.device == "cuda" else "cpu")
    if args.precision and args.precisions:
        fail("give --precision or --precisions, not both")
    precisions = [p for p in args.precisions.split(",") if p] if args.precisions else \
        [args.precision or "fp32"]
    if not precisions or len(set(precisions)) != len(precisions):
        fail(f"--precisions {args.precisions}: give each precision once, e.g. fp32,bf16")
    for p in precisions:
        why = precision_problem(p, args.device, [args.impl])
        if why:
            fail(f"--precision{'s' if args.precisions else ''} {p}: {why}")
    # The PyTorch modes of each precision: --modes for all, or the defaults.
    modes_of = {}
    for p in precisions:
        default = DEFAULT_MODES[p] if args.device == "cuda" else \
            ("fp32,bf16cl" if p == "bf16" else "fp32")
        modes_of[p] = [m for m in (args.modes or default).split(",") if m and m != "none"]
    args.variants = [parse_variant(v) for v in args.variant]
    if len({v[0] for v in args.variants}) != len(args.variants):
        fail("--variant: two variants with one name")
    if args.run_ms is None:
        args.run_ms = 40.0 if args.device == "cuda" else 30.0
    for name in ("repeats", "run_ms", "point_budget_s", "budget_s"):
        if getattr(args, name) <= 0:
            fail(f"--{name.replace('_', '-')} {getattr(args, name):g}: must be positive")
    for m in modes_of[precisions[0]]:  # --modes, when given, is every precision's
        if m not in PT_NAMES:
            fail(f"--modes: unknown mode '{m}' (known: {', '.join(PT_NAMES)})")
        if m in GRAPH_MODES and args.device != "cuda":
            fail(f"--modes {m} needs --device cuda (a CUDA graph)")

    full = grid()
    points = [p for p in full if p["id"] in QUICK] if args.quick else full
    if args.points:
        points = select(points, args.points)
    for p in points:
        p["work_flops"] = work_flops(p)
        p["memory_bytes"] = memory_bytes(p)
    if args.list:
        for p in points:
            print(f"{p['id']:24s} {p['work_flops'] / 1e9:12.4g} GFLOP/step  "
                  f"~{p['memory_bytes'] / 1e9:.1f} GB")
        return

    args.hpmc = os.path.abspath(args.hpmc)
    if not os.access(args.hpmc, os.X_OK):
        fail(f"--hpmc {args.hpmc}: no executable there (build hpmc first, or give its path)")
    try:
        import torch
        import pytorch_reference as ref
    except ImportError as e:
        fail(f"PyTorch is not importable by {sys.executable} ({e}); run this with the python "
             "that has it (Debian: /usr/bin/python3 with python3-torch)")
    if args.device == "cuda" and not torch.cuda.is_available():
        fail("--device cuda, but PyTorch sees no CUDA device (use --device cpu on a CPU machine)")
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    env = dict(os.environ)
    if args.threads > 0:
        env["OMP_NUM_THREADS"] = str(args.threads)

    if args.memory_gb is not None:
        limit, limit_from = args.memory_gb * 1e9, "--memory-gb"
    elif args.device == "cuda":
        limit, limit_from = torch.cuda.mem_get_info()[0] * 0.9, "90% of the GPU's free memory"
    else:
        with open("/proc/meminfo") as f:
            avail = [int(l.split()[1]) * 1024 for l in f if l.startswith("MemAvailable:")]
        if not avail:
            fail("/proc/meminfo has no MemAvailable: give --memory-gb")
        limit, limit_from = avail[0] * 0.8, "80% of MemAvailable"

    if not args.precisions:
        args.precision, args.modes = precisions[0], modes_of[precisions[0]]
        run_sweep(args, points, ref, env, limit, limit_from, args.out)
        return
    sections = [f"hpmc beside PyTorch in {', '.join(precisions)}, one sweep each "
                f"(`{shlex.join([os.path.basename(sys.executable)] + sys.argv)}`); each "
                "section's files are in the folder it names."]
    for p in precisions:
        one = argparse.Namespace(**{**vars(args), "precision": p, "modes": modes_of[p]})
        out_dir = os.path.join(args.out, p)
        md = run_sweep(one, copy.deepcopy(points), ref, env, limit, limit_from, out_dir)
        sections += [f"## {p} ({p}/sweep.md, sweep.json)", md.rstrip("\n")]
        write_atomic(os.path.join(args.out, "sweep.md"), "\n\n".join(sections) + "\n")
    print(f"wrote {os.path.join(args.out, 'sweep.md')}: {', '.join(precisions)}")


def run_sweep(args, points, ref, env, limit, limit_from, out_dir):
    """One sweep of `points` in args.precision with args.modes into out_dir
    (sweep.md, sweep.json, sweep.png); returns the table's markdown."""
    os.makedirs(out_dir, exist_ok=True)
    report = {
        "machine": machine(args.device),
        "command": shlex.join([os.path.basename(sys.executable)] + sys.argv),
        "settings": {"impl": args.impl, "precision": args.precision, "modes": args.modes,
                     "targets": [{"mode": m, "at_most": most, "launch_bound_only": lb}
                                 for m, most, lb in TARGETS[args.precision]],
                     "repeats": args.repeats,
                     "run_ms": args.run_ms, "point_budget_s": args.point_budget_s,
                     "budget_s": args.budget_s, "memory_limit_bytes": limit,
                     "memory_limit_from": limit_from, "launch_bound_ms": args.launch_bound_ms,
                     "threads": args.threads, "lr": LR,
                     "variants": [{"name": n, "env": e, "args": a} for n, e, a in args.variants]},
        "grid_order": [p["id"] for p in points],
        "configs": {},
        "points": [],
    }
    t_start = time.perf_counter()
    todo = sorted(points, key=lambda p: p["work_flops"])
    with tempfile.TemporaryDirectory(prefix="hpmc-sweep-") as tmp:
        for i, p in enumerate(todo, 1):
            elapsed = time.perf_counter() - t_start
            report["points"].append(p)
            if elapsed > args.budget_s:
                p["skipped"] = f"not run: the sweep's --budget-s {args.budget_s:g} s ran out"
                continue
            if p["memory_bytes"] > limit:
                p["skipped"] = (f"skipped: needs about {p['memory_bytes'] / 1e9:.1f} GB, more than "
                                f"the {limit / 1e9:.1f} GB allowed ({limit_from})")
                print(f"[{i}/{len(todo)} {elapsed:5.0f} s] {p['id']}: {p['skipped']}", flush=True)
                write_outputs(report, out_dir, final=False)
                continue
            cfg_path = os.path.join(tmp, p["model"] + ".yaml")
            if p["model"] not in report["configs"]:
                report["configs"][p["model"]] = config_yaml(p)
                with open(cfg_path, "w") as f:
                    f.write(report["configs"][p["model"]])
            deadline = time.perf_counter() + args.point_budget_s
            p["pytorch"] = {m: time_pytorch(ref, p, m, args, deadline) for m in args.modes}
            times = [r["ms"] for r in p["pytorch"].values() if "ms" in r]
            # Without a PyTorch time, guess from the work at 10 TFLOP/s (GPU) or 50 GFLOP/s.
            est = min(times) if times else p["work_flops"] / (1e10 if args.device == "cuda"
                                                              else 5e7)
            p["hpmc"] = time_hpmc(p, cfg_path, est, args, env)
            if args.variants:
                p["variants"] = {n: time_hpmc(p, cfg_path, est, args, {**env, **e}, a)
                                 for n, e, a in args.variants}
            judge(p, args)
            h = p["hpmc"].get("ms_per_step")
            pts = ", ".join(f"{m} {r['ms']:.4g}" if "ms" in r else f"{m} failed"
                            for m, r in p["pytorch"].items())
            ratios = ", ".join(f"{r:.2f}x {m}" for m, r in p["ratios"].items())
            print(f"[{i}/{len(todo)} {time.perf_counter() - t_start:5.0f} s] {p['id']}: hpmc "
                  + (f"{h:.4g} ms ({short_step(p['hpmc'].get('path', ''))})" if h else "failed")
                  + "".join(f"; {n} " + (f"{r['ms_per_step']:.4g} ms" if "ms_per_step" in r
                                         else "failed") for n, r in p.get("variants", {}).items())
                  + f"; PyTorch ms: {pts}" + (f"; {ratios}" if ratios else "")
                  + (" MISSED" if p["misses"] else ""), flush=True)
            write_outputs(report, out_dir, final=False)
    report["wall_s"] = time.perf_counter() - t_start
    md = write_outputs(report, out_dir, final=True)
    print("\n" + md)
    print(f"wrote {os.path.join(out_dir, 'sweep.md')} and sweep.json "
          f"({report['wall_s']:.0f} s)")
    return md


if __name__ == "__main__":
    main()
