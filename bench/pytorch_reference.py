#!/usr/bin/env python3
"""The hpmc models in PyTorch, timed the same way hpmc is: whole training
steps (forward, MSE or cross-entropy, backward, SGD) at the same batch and
shapes, on synthetic data of the real shape, medians of several runs.

    python3 bench/pytorch_reference.py --model cifar_ae --device cuda --steps 200

Modes (--modes, comma separated):
  fp32     FP32 with TF32 off (exact float32 arithmetic, as hpmc)
  default  PyTorch's defaults (cuDNN may use TF32 for convolutions)
  bf16cl   bf16 autocast with channels-last tensors
  graph    the default mode with the whole step captured in a CUDA graph
  bf16clg  bf16 autocast with channels-last tensors, the whole step captured
           in a CUDA graph: what a performance-minded PyTorch user runs, the
           fair comparison for hpmc's `training.precision: bf16`
Prints one line per mode: ms/step, images/s and epoch-equivalent seconds
(50,000 images for CIFAR, 60,000 for MNIST). Models (--model): cifar_ae,
fashion_ae and mnist_mlp, as in configs/. On the CPU, use --threads N to match
hpmc's thread count (--modes fp32, or bf16cl beside hpmc's bf16; graph and
bf16clg need CUDA and are refused there). PyTorch is a reference here, never a
dependency of hpmc.

bench/sweep.py imports the model builders (mlp, conv_ae), training_step and
time_steps to time the same models at other sizes.
"""
import argparse
import statistics
import sys
import time

import torch
import torch.nn as nn


def mlp(hidden, inputs=784, classes=10):
    """Flatten, then a linear layer and a ReLU per hidden width, then the
    classifier: configs/mnist_mlp.yaml's shape at any widths."""
    layers = [nn.Flatten()]
    for width in hidden:
        layers += [nn.Linear(inputs, width), nn.ReLU()]
        inputs = width
    return nn.Sequential(*layers, nn.Linear(inputs, classes))


def conv_ae(channels, kernel=3, in_channels=3):
    """configs/cifar_ae.yaml's autoencoder at other widths and kernel sizes:
    conv c1, pool, conv c2, pool, conv c3, upsample, conv c4, upsample, conv
    back to the input's channels; ReLU after every conv but the last, the
    padding that keeps the size."""
    c1, c2, c3, c4 = channels
    pad = kernel // 2
    return nn.Sequential(
        nn.Conv2d(in_channels, c1, kernel, padding=pad), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(c1, c2, kernel, padding=pad), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(c2, c3, kernel, padding=pad), nn.ReLU(), nn.Upsample(scale_factor=2),
        nn.Conv2d(c3, c4, kernel, padding=pad), nn.ReLU(), nn.Upsample(scale_factor=2),
        nn.Conv2d(c4, in_channels, kernel, padding=pad))


# name: (builder, sample shape, epoch images, loss)
MODELS = {
    "cifar_ae": (lambda: conv_ae((256, 128, 128, 256)), (3, 32, 32), 50000, "mse"),
    # configs/fashion_ae.yaml: 1x28x28 -> 16x7x7 -> 1x28x28
    "fashion_ae": (lambda: conv_ae((32, 16, 16, 32), in_channels=1), (1, 28, 28), 60000, "mse"),
    "mnist_mlp": (lambda: mlp((320, 160)), (1, 28, 28), 60000, "ce"),
}


MODES = ("fp32", "default", "bf16cl", "graph", "bf16clg")
GRAPH_MODES = ("graph", "bf16clg")  # the step captured in a CUDA graph
BF16_MODES = ("bf16cl", "bf16clg")  # bf16 autocast, channels-last tensors


def sync(dev):
    if dev == "cuda":
        torch.cuda.synchronize()


def training_step(build, shape, loss_kind, mode, batch, dev, lr, momentum):
    """A function run(i) that takes one training step (forward, MSE or
    cross-entropy, backward, SGD) of a fresh model from build() in `mode`
    (see the modes above) on the i-th of 8 rotating random batches. In the
    graph modes the step is captured first (after 3 warm-up steps on a side
    stream, under the same autocast and memory format as the step) and run(i)
    copies the batch in and replays it."""
    if mode not in MODES:
        raise ValueError(f"unknown mode '{mode}' (known: {', '.join(MODES)})")
    if mode in GRAPH_MODES and dev != "cuda":
        raise RuntimeError(f"mode {mode}: CUDA graphs need --device cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = mode != "fp32"
    torch.manual_seed(0)
    model = build().to(dev)
    bf16 = mode in BF16_MODES
    memory_format = torch.channels_last if bf16 else torch.contiguous_format
    model = model.to(memory_format=memory_format)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    # Several batches of random data (never zeros), rotated so caches do not flatter.
    xs = [torch.rand(batch, *shape, device=dev).to(memory_format=memory_format)
          for _ in range(8)]
    ys = [torch.randint(0, 10, (batch,), device=dev) for _ in range(8)]
    lossf = nn.MSELoss() if loss_kind == "mse" else nn.CrossEntropyLoss()
    # A captured step must cast the weights inside the graph, on every replay:
    # autocast's cache of cast weights would otherwise carry casts made outside
    # it. Each weight is used once a forward here, so the cache saves nothing.
    cache = mode not in GRAPH_MODES

    def forward_backward(x, y):
        """Forward (under the mode's autocast), the loss in FP32, backward."""
        with torch.autocast(dev, dtype=torch.bfloat16, enabled=bf16, cache_enabled=cache):
            out = model(x)
            loss = lossf(out.float(), x if loss_kind == "mse" else y)
        loss.backward()
        return loss

    def step(i):
        opt.zero_grad(set_to_none=False)
        loss = forward_backward(xs[i % 8], ys[i % 8])
        opt.step()
        return loss

    if mode not in GRAPH_MODES:
        return step
    static_x = xs[0].clone()  # keeps the memory format
    static_y = ys[0].clone()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):  # warm up on a side stream, as the docs require
            opt.zero_grad(set_to_none=False)
            loss = forward_backward(static_x, static_y)
            opt.step()
    # The last warm-up's loss would keep its autograd graph, and with it the
    # side stream's gradient-accumulation nodes, alive into the capture.
    del loss
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    # No gradients going in: the captured backward then writes them afresh on
    # every replay (memory of the graph's own) instead of adding to the last
    # replay's, which would train on the sum of every batch so far.
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        forward_backward(static_x, static_y)
        opt.step()

    def replay(i):
        static_x.copy_(xs[i % 8])
        static_y.copy_(ys[i % 8])
        g.replay()

    return replay


def time_steps(run, dev, steps, repeats, first=0):
    """Seconds per step of each of `repeats` timed runs of `steps` steps,
    each between two device synchronizations; step indices from `first`."""
    times = []
    for _ in range(repeats):
        sync(dev)
        t0 = time.perf_counter()
        for i in range(first, first + steps):
            run(i)
        sync(dev)
        times.append((time.perf_counter() - t0) / steps)
        first += steps
    return times


def bench(args, mode):
    build, shape, epoch_images, loss_kind = MODELS[args.model]
    dev = args.device
    run = training_step(build, shape, loss_kind, mode, args.batch, dev, args.lr, args.momentum)
    for i in range(args.warmup):
        run(i)
    times = time_steps(run, dev, args.steps, args.repeats)
    ms = statistics.median(times) * 1e3
    ips = args.batch / (ms / 1e3)
    print(f"pytorch {args.model} {mode:8s} batch {args.batch}: {ms:8.3f} ms/step  "
          f"{ips:10.0f} img/s  epoch-equivalent {epoch_images / ips:8.3f} s  "
          f"(median of {args.repeats} x {args.steps} steps, torch {torch.__version__}"
          + (f", {torch.get_num_threads()} threads)" if dev == "cpu" else ")"), flush=True)


def fail(msg):
    print(f"pytorch_reference.py: error: {msg}", file=sys.stderr)
    sys.exit(2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="cifar_ae", choices=sorted(MODELS))
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--modes", default="fp32,default")
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    for m in modes:
        if m not in MODES:
            fail(f"--modes {m}: unknown mode (known: {', '.join(MODES)})")
        if m in GRAPH_MODES and args.device != "cuda":
            fail(f"--modes {m}: CUDA graphs need --device cuda (on --device {args.device}, "
                 "time fp32 or bf16cl)")
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    for mode in modes:
        bench(args, mode)


if __name__ == "__main__":
    main()
