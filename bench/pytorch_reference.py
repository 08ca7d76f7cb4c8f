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
Prints one line per mode: ms/step, images/s and epoch-equivalent seconds
(50,000 images for CIFAR, 60,000 for MNIST). Models (--model): cifar_ae,
fashion_ae and mnist_mlp, as in configs/. On the CPU, use --threads N to match
hpmc's thread count (--modes fp32: the other modes are about GPUs). PyTorch is
a reference here, never a dependency of hpmc.
"""
import argparse
import statistics
import time

import torch
import torch.nn as nn


def cifar_ae():
    return nn.Sequential(
        nn.Conv2d(3, 256, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(256, 128, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(128, 128, 3, padding=1), nn.ReLU(), nn.Upsample(scale_factor=2),
        nn.Conv2d(128, 256, 3, padding=1), nn.ReLU(), nn.Upsample(scale_factor=2),
        nn.Conv2d(256, 3, 3, padding=1))


def fashion_ae():
    # configs/fashion_ae.yaml: 1x28x28 -> 16x7x7 -> 1x28x28
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(), nn.Upsample(scale_factor=2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.Upsample(scale_factor=2),
        nn.Conv2d(32, 1, 3, padding=1))


def mnist_mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 320), nn.ReLU(), nn.Linear(320, 160),
                         nn.ReLU(), nn.Linear(160, 10))


MODELS = {
    "cifar_ae": (cifar_ae, (3, 32, 32), 50000, "mse"),
    "fashion_ae": (fashion_ae, (1, 28, 28), 60000, "mse"),
    "mnist_mlp": (mnist_mlp, (1, 28, 28), 60000, "ce"),
}


def sync(dev):
    if dev == "cuda":
        torch.cuda.synchronize()


def bench(args, mode):
    build, shape, epoch_images, loss_kind = MODELS[args.model]
    dev = args.device
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = mode != "fp32"
    torch.manual_seed(0)
    model = build().to(dev)
    memory_format = torch.channels_last if mode == "bf16cl" else torch.contiguous_format
    model = model.to(memory_format=memory_format)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    # Several batches of random data (never zeros), rotated so caches do not flatter.
    xs = [torch.rand(args.batch, *shape, device=dev).to(memory_format=memory_format)
          for _ in range(8)]
    ys = [torch.randint(0, 10, (args.batch,), device=dev) for _ in range(8)]
    lossf = nn.MSELoss() if loss_kind == "mse" else nn.CrossEntropyLoss()

    def step(i):
        x, y = xs[i % 8], ys[i % 8]
        opt.zero_grad(set_to_none=False)
        with torch.autocast(dev, dtype=torch.bfloat16, enabled=(mode == "bf16cl")):
            out = model(x)
            loss = lossf(out.float(), x if loss_kind == "mse" else y)
        loss.backward()
        opt.step()
        return loss

    run = step
    if mode == "graph":
        assert dev == "cuda", "CUDA graphs need --device cuda"
        static_x = xs[0].clone()
        static_y = ys[0].clone()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):  # warm up on a side stream, as the docs require
                opt.zero_grad(set_to_none=False)
                out = model(static_x)
                (lossf(out, static_x) if loss_kind == "mse" else lossf(out, static_y)).backward()
                opt.step()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=False)
        with torch.cuda.graph(g):
            out = model(static_x)
            loss = lossf(out, static_x) if loss_kind == "mse" else lossf(out, static_y)
            loss.backward()
            opt.step()

        def run(i):
            static_x.copy_(xs[i % 8])
            static_y.copy_(ys[i % 8])
            g.replay()

    for i in range(args.warmup):
        run(i)
    sync(dev)
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        for i in range(args.steps):
            run(i)
        sync(dev)
        times.append((time.perf_counter() - t0) / args.steps)
    ms = statistics.median(times) * 1e3
    ips = args.batch / (ms / 1e3)
    print(f"pytorch {args.model} {mode:8s} batch {args.batch}: {ms:8.3f} ms/step  "
          f"{ips:10.0f} img/s  epoch-equivalent {epoch_images / ips:8.3f} s  "
          f"(median of {args.repeats} x {args.steps} steps, torch {torch.__version__}"
          + (f", {torch.get_num_threads()} threads)" if dev == "cpu" else ")"), flush=True)


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
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    for mode in args.modes.split(","):
        bench(args, mode)


if __name__ == "__main__":
    main()
