"""What bench/compare.py, bench/sweep.py and bench/precision.py share:
running a command from the repository root, reading the reports of `hpmc
bench` and of bench/pytorch_reference.py, checking a precision against the
device and impls, describing the machine, and writing a result file whole or
not at all.

A library, not a script: they import it from their own directory. It needs
python3 alone (PyTorch is asked only for its version, where it is there).
"""
import datetime
import os
import platform
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The shipped configs, their optimizer settings (for PyTorch to train the same
# way) and the timing plan per device: (steps, repeats, warm-up steps).
SHIPPED = {
    "cifar_ae": {"config": "configs/cifar_ae.yaml", "lr": 0.01, "momentum": 0.9,
                 "plan": {"cuda": (50, 5, 10), "cpu": (3, 3, 1)}},
    "mnist_mlp": {"config": "configs/mnist_mlp.yaml", "lr": 0.03, "momentum": 0.0,
                  "plan": {"cuda": (300, 5, 30), "cpu": (100, 5, 10)}},
}

PRECISIONS = ("fp32", "tf32", "bf16")  # hpmc's training.precision


def precision_problem(precision, device, impls):
    """Why hpmc cannot run `precision` on `device` with every impl of
    `impls` (a one-line reason), or None if it can. hpmc refuses these too,
    but only once a point runs; the scripts refuse them before anything runs."""
    if precision not in PRECISIONS:
        return f"unknown precision '{precision}' (known: {', '.join(PRECISIONS)})"
    if precision == "tf32" and device != "cuda":
        return "tf32 is a tensor-core format: it needs --device cuda (hpmc refuses it on the CPU)"
    fp32_only = [i for i in impls if i in ("naive", "tiled")]
    if precision != "fp32" and fp32_only:
        return (f"--impl {','.join(fp32_only)} runs fp32 only (the FP32 reference kernels); "
                f"time {precision} with --impl im2col")
    return None


class CommandFailed(Exception):
    """A command that exited non-zero (or ran past its time limit); `output`
    holds what it printed, stdout and stderr together."""

    def __init__(self, message, output=""):
        super().__init__(message)
        self.output = output


def run(cmd, env=None, timeout=None):
    """Runs cmd in the repository root and returns its stdout and stderr
    together; CommandFailed if it fails or outlives `timeout` seconds (it is
    killed then). Each command is echoed on stderr first."""
    print("$ " + " ".join(cmd), file=sys.stderr, flush=True)
    try:
        p = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=timeout)
    except OSError as e:  # no such program, not executable
        raise CommandFailed(f"could not start {cmd[0]}: {e.strerror}") from None
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else e.stdout or ""
        raise CommandFailed(f"ran past its limit of {timeout:.0f} s and was stopped: {' '.join(cmd)}",
                            out) from None
    if p.returncode != 0:
        raise CommandFailed(f"exit {p.returncode}: {' '.join(cmd)}", p.stdout)
    return p.stdout


# bench: <config> impl=<impl> precision=<p> batch=<n> ms/step=<x> img/s=<y> epoch_s=<z>
#        tflops=<t> peak_frac=<f>
WORK_LINE = re.compile(r"^\s*work: .*\(([\d.e+-]+) GFLOP per step", re.M)


def parse_hpmc_bench(out):
    """The figures of `hpmc bench`'s report: its last 'bench:' line, the step
    strategy of its 'step:' line (`path`; '' if none) and the work per step
    it counts (`gflop_per_step`). ValueError if there is no 'bench:' line."""
    lines = [l for l in out.splitlines() if l.startswith("bench: ")]
    if not lines:
        raise ValueError("no 'bench:' line in hpmc's output")
    kv = dict(f.split("=", 1) for f in lines[-1].split()[2:])
    step = [l for l in out.splitlines() if l.strip().startswith("step:")]
    work = WORK_LINE.search(out)
    return {
        "impl": kv["impl"], "precision": kv.get("precision", "fp32"), "batch": int(kv["batch"]),
        "ms_per_step": float(kv["ms/step"]), "images_per_s": float(kv["img/s"]),
        "epoch_s": float(kv["epoch_s"]), "tflops": float(kv["tflops"]),
        "peak_frac": None if kv["peak_frac"] == "na" else float(kv["peak_frac"]),
        "path": step[0].split("step:", 1)[1].strip() if step else "",
        "gflop_per_step": float(work.group(1)) if work else None,
    }


# pytorch <model> <mode> batch <n>: <x> ms/step  <y> img/s  epoch-equivalent <z> s  (...)
PT_LINE = re.compile(r"pytorch (\S+) (\S+)\s+batch (\d+):\s+([\d.]+) ms/step\s+(\d+) img/s\s+"
                     r"epoch-equivalent\s+([\d.]+) s")


def parse_pytorch_reference(out):
    """bench/pytorch_reference.py's result lines, one dict per mode in the
    order printed: model, mode, batch, ms_per_step, images_per_s, epoch_s and
    the line itself."""
    rows = []
    for line in out.splitlines():
        g = PT_LINE.search(line)
        if g:
            rows.append({"model": g.group(1), "mode": g.group(2), "batch": int(g.group(3)),
                         "ms_per_step": float(g.group(4)), "images_per_s": float(g.group(5)),
                         "epoch_s": float(g.group(6)), "line": line})
    return rows


def machine(device):
    """Date, host, the GPU (on cuda) and CPU, and PyTorch's version if the
    python running this has it."""
    info = {"date": datetime.date.today().isoformat(), "host": platform.node(), "device": device}
    try:
        if device == "cuda":
            info["gpu"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                 "--format=csv,noheader"], stdout=subprocess.PIPE, text=True).stdout.strip()
        with open("/proc/cpuinfo") as f:
            names = [l.split(":", 1)[1].strip() for l in f if l.startswith("model name")]
        info["cpu"] = f"{names[0]} ({len(names)} logical CPUs)" if names else "unknown"
    except OSError:
        pass
    try:
        import torch  # only to record its version, if the same python has it
        info["torch"] = torch.__version__
    except ImportError:
        pass
    return info


# PyTorch's modes (bench/pytorch_reference.py) as the sweep's and the
# precision table's columns name them, and those that capture a CUDA graph.
PT_NAMES = {"fp32": "PyTorch FP32", "default": "PyTorch defaults", "graph": "PyTorch CUDA graph",
            "bf16cl": "PyTorch bf16 + channels-last",
            "bf16clg": "PyTorch bf16 + channels-last + graph"}
GRAPH_MODES = ("graph", "bf16clg")


def machine_line(m, threads):
    """A table's first words: the GPU (or CPU), the date, PyTorch's version
    and the thread count, from machine()'s record."""
    where = m.get("gpu", "").split(",")[0] if m["device"] == "cuda" else m.get("cpu", "")
    line = f"{where}, {m['date']}"
    if "torch" in m:
        line += f", PyTorch {m['torch']}"
    if threads:
        line += f", {threads} thread{'s' if threads > 1 else ''}"
    return line


def write_atomic(path, text):
    """Writes text to path through a temporary file in the same directory and
    a rename: a reader (or a run stopped midway) sees the old file or the new
    one, never half of one."""
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix="." + os.path.basename(path) + ".")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
