#!/usr/bin/env python3
"""Time `hpmc features` in each format: the median of N exports of the
CIFAR AE's features (by default all 60,000 images, 8,192 values each) as
CSV, .npy and LIBSVM, with the values per second.

    python3 bench/features.py --hpmc build/hpmc
    python3 bench/features.py --hpmc build/hpmc --train-limit 10000 --test-limit 2000

Nothing is trained and nothing is read: the images are synthetic
(data.synthetic=true) and the weights come from a run of one step on one
image, which the script makes first (--weights uses a checkpoint of your own
instead). Each export runs `hpmc features CONFIG --split all --format F`
into a scratch directory (--out; removed at the end), so the files go to
that disk. Besides the wall time of the whole command, hpmc's own timing
line gives the encoder's time (forward passes, copies to the host, the
finiteness check) and the format's (formatting, writing, the final fsync);
"write M values/s" counts the values over the format's time alone.

Needs python3 alone (no packages), so it runs on a bare GPU host too.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def fail(msg):
    print(f"features.py: error: {msg}", file=sys.stderr)
    sys.exit(2)


def run(cmd, what):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        fail(f"{what} failed (exit {p.returncode}): {' '.join(cmd)}\n{p.stderr.strip()}")
    return p.stdout, wall


def machine():
    """The CPU's model and count, from lscpu where there is one."""
    model, cpus = "", os.cpu_count()
    try:
        out = subprocess.run(["lscpu"], stdout=subprocess.PIPE, text=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    return f"{model or 'unknown CPU'}, {cpus} CPUs"


# "train: 50000 x 8192 values in 12.31 s (encoder 3.02 s, csv 8.01 s): 33.3 M values/s"
TIMING = re.compile(r"^(train|test): (\d+) x (\d+) values in ([\d.]+) s \((.*)\): ", re.M)


def parse_timing(out, fmt):
    """(values, encoder seconds, the format's seconds) summed over the splits."""
    values, encoder, write = 0, 0.0, 0.0
    for m in TIMING.finditer(out):
        values += int(m.group(2)) * int(m.group(3))
        parts = dict(p.rsplit(" ", 2)[:2] for p in m.group(5).split(", "))
        encoder += float(parts["encoder"])
        write += float(parts[fmt])
    if values == 0:
        fail(f"no timing line in hpmc's output:\n{out}")
    return values, encoder, write


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hpmc", default="build/hpmc", help="the hpmc binary (default build/hpmc)")
    ap.add_argument("--config", default="configs/cifar_ae.yaml")
    ap.add_argument("--impl", default="auto", help="--impl for the exports (default auto)")
    ap.add_argument("--formats", default="csv,npy,libsvm", help="comma-separated (default all three)")
    ap.add_argument("--repeats", type=int, default=3, help="exports per format; the median counts")
    ap.add_argument("--train-limit", type=int, default=0, help="training images (0: all 50,000)")
    ap.add_argument("--test-limit", type=int, default=0, help="test images (0: all 10,000)")
    ap.add_argument("--batch", type=int, default=0, help="--batch for the exports (0: the config's)")
    ap.add_argument("--weights", default="", help="a checkpoint of CONFIG (default: made here)")
    ap.add_argument("--out", default="", help="scratch directory (default: a new one in $TMPDIR)")
    args = ap.parse_args()
    if not os.access(args.hpmc, os.X_OK):
        fail(f"{args.hpmc} is not an executable; build hpmc or pass --hpmc PATH")
    formats = [f for f in args.formats.split(",") if f]
    for f in formats:
        if f not in ("csv", "npy", "libsvm"):
            fail(f"--formats: unknown format '{f}'; choose from csv, npy, libsvm")
    if args.repeats < 1:
        fail("--repeats must be at least 1")

    scratch = args.out or tempfile.mkdtemp(prefix="hpmc-features-bench-")
    os.makedirs(scratch, exist_ok=True)
    data = ["--set", "data.synthetic=true"]
    if args.train_limit:
        data += ["--set", f"data.train_limit={args.train_limit}"]
    if args.test_limit:
        data += ["--set", f"data.test_limit={args.test_limit}"]
    try:
        weights = args.weights
        if not weights:
            # One step on one image: weights of the right shapes, at once.
            run([args.hpmc, "run", args.config, "--set", "data.synthetic=true", "--set",
                 "data.train_limit=1", "--set", "data.test_limit=1", "--epochs", "1", "--batch", "1",
                 "--impl", "cpu", "--progress", "quiet", "--overwrite",
                 "--out", os.path.join(scratch, "run"), "--weights-dir", os.path.join(scratch, "w")],
                "the one-step run that makes the weights")
            weights = os.path.join(scratch, "w", os.path.basename(args.config).rsplit(".", 1)[0] +
                                   ".safetensors")
        print(f"hpmc features {args.config}: machine {machine()}; impl {args.impl}; "
              f"median of {args.repeats}", flush=True)
        rows = []
        for fmt in formats:
            walls, writes, encoders = [], [], []
            for _ in range(args.repeats):
                out_dir = os.path.join(scratch, "f")
                shutil.rmtree(out_dir, ignore_errors=True)  # each export writes afresh
                cmd = [args.hpmc, "features", args.config, "--weights", weights, "--split", "all",
                       "--format", fmt, "--impl", args.impl, "--progress", "quiet",
                       "--out", out_dir] + data
                if args.batch:
                    cmd += ["--batch", str(args.batch)]
                out, wall = run(cmd, f"the {fmt} export")
                values, encoder, write = parse_timing(out, fmt)
                chosen = re.search(r", impl (\w+), ", out)
                walls.append(wall)
                writes.append(write)
                encoders.append(encoder)
                size = sum(os.path.getsize(os.path.join(out_dir, f)) for f in os.listdir(out_dir))
            shutil.rmtree(os.path.join(scratch, "f"), ignore_errors=True)
            wall, write, encoder = (statistics.median(x) for x in (walls, writes, encoders))
            rows.append((fmt, chosen.group(1) if chosen else "?", values, size, wall, encoder,
                         write))
            print(f"  {fmt:6s} {wall:8.2f} s wall ({min(walls):.2f}-{max(walls):.2f}), encoder "
                  f"{encoder:.2f} s, {fmt} {write:.2f} s: {values / wall / 1e6:7.1f} M values/s "
                  f"overall, {values / write / 1e6:7.1f} M values/s written, "
                  f"{size / 1e9:.2f} GB", flush=True)
        for fmt, impl, values, size, wall, encoder, write in rows:
            print(f"features: format={fmt} impl={impl} values={values} bytes={size} "
                  f"wall_s={wall:.3f} encoder_s={encoder:.3f} write_s={write:.3f} "
                  f"mvalues_per_s={values / wall / 1e6:.1f} write_mvalues_per_s="
                  f"{values / write / 1e6:.1f}")
    finally:
        if not args.out:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
