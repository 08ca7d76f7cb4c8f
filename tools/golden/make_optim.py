#!/usr/bin/env python3
"""Golden optimizer trajectories for tests/test_optim.cpp (GoldenOptim.*).

A small MLP (flatten, linear 25->12, relu, linear 12->10, softmax
cross-entropy) trains for 30 steps on a fixed sequence of batches of 8, from
weights and inputs given by closed-form formulas that the C++ test
reproduces, once per case:

  sgd_nesterov  SGD, momentum 0.9, Nesterov, weight decay 0.01; warm-up 3
                steps then StepLR(step_size 10, gamma 0.5)
  adam          Adam, L2 weight decay 0.001; constant rate; clip_grad_norm 0.5
  adamw_cosine  AdamW, betas (0.85, 0.99), eps 1e-7, weight decay 0.05;
                warm-up 5 steps then CosineAnnealingLR to 0.001 over 30
                steps; clip_grad_norm 0.6

The learning rates come from PyTorch's own schedulers (LinearLR and StepLR
or CosineAnnealingLR chained by SequentialLR, stepped once per optimizer
step), checked here against hpmc's closed form (optim/optim_config.h). The
clipping is torch.nn.utils.clip_grad_norm_. PyTorch computes each trajectory
in float64 (the reference: every step's loss and the final parameters go
into tests/golden_optim.h) and in float32 (its largest departures from
float64 are written beside them, as a yardstick for hpmc's float32).

Inputs and initial weights are rounded to float32 first, so that both
programs start from identical values and any difference is arithmetic.

Run offline when the model, the cases or the formulas change:
    /usr/bin/python3 tools/golden/make_optim.py > tests/golden_optim.h
PyTorch is a reference here, never a dependency of hpmc.
"""
import math
import warnings

import torch
import torch.nn as nn

BATCH, STEPS, IN, HIDDEN, CLASSES = 8, 30, 25, 12, 10
# SequentialLR steps its schedulers with an epoch argument, which 1.13 warns about.
warnings.filterwarnings("ignore", message="The epoch parameter")

CASES = [
    dict(name="sgd_nesterov",
         opt=dict(type="sgd", lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
         sched=dict(type="step", warmup_steps=3, step_size=10, gamma=0.5), clip=0.0),
    dict(name="adam",
         opt=dict(type="adam", lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.001),
         sched=dict(type="constant", warmup_steps=0), clip=0.5),
    dict(name="adamw_cosine",
         opt=dict(type="adamw", lr=0.02, betas=(0.85, 0.99), eps=1e-7, weight_decay=0.05),
         sched=dict(type="cosine", warmup_steps=5, min_lr=0.001, total_steps=STEPS), clip=0.6),
]


def fill(t, k):
    """Parameter tensor k (in model order): sin(2.399963229728653*i + k/2) / sqrt(fan_in),
    rounded to float32 (make_trajectory.py's formula)."""
    n = t.numel()
    fan = t.shape[1] if t.dim() > 1 else n
    i = torch.arange(n, dtype=torch.float64)
    vals = torch.sin(2.399963229728653 * i + 0.5 * k) / math.sqrt(fan)
    with torch.no_grad():
        t.copy_(vals.float().to(t.dtype).reshape(t.shape))


def batch(s):
    """Step s's batch: x[b, i] = 0.5 + 0.5 sin(1.3 (25 b + i) + 0.7 s + 0.2) rounded to
    float32; label (3 b + s) mod 10."""
    i = torch.arange(BATCH * IN, dtype=torch.float64)
    x = (0.5 + 0.5 * torch.sin(1.3 * i + 0.7 * s + 0.2)).float().double()
    y = torch.tensor([(3 * b + s) % CLASSES for b in range(BATCH)])
    return x.reshape(BATCH, 1, 5, 5), y


def hpmc_lr(case, t):
    """optim_config.h's closed form."""
    o, sc = case["opt"], case["sched"]
    base, w = o["lr"], sc["warmup_steps"]
    if t < w:
        return base * (t + 1) / w
    u = t - w
    if sc["type"] == "step":
        return base * sc["gamma"] ** (u // sc["step_size"])
    if sc["type"] == "cosine":
        tmax = sc["total_steps"] - w
        return sc["min_lr"] + (base - sc["min_lr"]) * (1 + math.cos(math.pi * min(u, tmax) / tmax)) / 2
    return base


def make_optimizer(case, params):
    o = case["opt"]
    if o["type"] == "sgd":
        return torch.optim.SGD(params, lr=o["lr"], momentum=o["momentum"], nesterov=o["nesterov"],
                               weight_decay=o["weight_decay"])
    cls = torch.optim.Adam if o["type"] == "adam" else torch.optim.AdamW
    return cls(params, lr=o["lr"], betas=o["betas"], eps=o["eps"], weight_decay=o["weight_decay"])


def make_scheduler(case, opt):
    sc = case["sched"]
    w = sc["warmup_steps"]
    if sc["type"] == "step":
        main = torch.optim.lr_scheduler.StepLR(opt, step_size=sc["step_size"], gamma=sc["gamma"])
    elif sc["type"] == "cosine":
        main = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=sc["total_steps"] - w,
                                                          eta_min=sc["min_lr"])
    else:
        main = torch.optim.lr_scheduler.ConstantLR(opt, factor=1.0, total_iters=0)
    if w == 0:
        return main
    warm = torch.optim.lr_scheduler.LinearLR(opt, start_factor=1.0 / w, end_factor=1.0,
                                             total_iters=w - 1)
    return torch.optim.lr_scheduler.SequentialLR(opt, [warm, main], milestones=[w])


def trajectory(case, dtype):
    model = nn.Sequential(nn.Flatten(), nn.Linear(IN, HIDDEN), nn.ReLU(),
                          nn.Linear(HIDDEN, CLASSES)).to(dtype)
    for k, p in enumerate(model.parameters()):
        fill(p, k)
    opt = make_optimizer(case, model.parameters())
    sched = make_scheduler(case, opt)
    losses, clipped, margin = [], 0, math.inf
    for s in range(STEPS):
        lr = opt.param_groups[0]["lr"]
        assert abs(lr - hpmc_lr(case, s)) <= 1e-12 * hpmc_lr(case, s), (case["name"], s, lr)
        x, y = batch(s)
        x = x.to(dtype)
        opt.zero_grad()
        pre = model[1](model[0](x))
        margin = min(margin, pre.abs().min().item())
        loss = nn.functional.cross_entropy(model[3](model[2](pre)), y)
        loss.backward()
        if case["clip"] > 0:
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), case["clip"])
            clipped += int(norm.item() > case["clip"])
        opt.step()
        sched.step()
        losses.append(loss.item())
    params = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).double()
    return losses, params, clipped, margin


def yaml_of(case):
    o, sc = case["opt"], case["sched"]
    parts = [f"type: {o['type']}", f"lr: {o['lr']!r}"]
    if o["type"] == "sgd":
        parts += [f"momentum: {o['momentum']!r}", f"nesterov: {str(o['nesterov']).lower()}"]
    else:
        parts += [f"betas: [{o['betas'][0]!r}, {o['betas'][1]!r}]", f"eps: {o['eps']!r}"]
    parts.append(f"weight_decay: {o['weight_decay']!r}")
    sched = ", ".join(f"{k}: {v!r}" if not isinstance(v, str) else f"{k}: {v}"
                      for k, v in sc.items())
    return (f"training: {{optimizer: {{{', '.join(parts)}}}, schedule: {{{sched}}}, "
            f"clip_grad_norm: {case['clip']!r}}}")


print("// Generated by tools/golden/make_optim.py with PyTorch", torch.__version__,
      "in float64; do not edit.")
print("#pragma once")
print(f"constexpr int kOptimBatch = {BATCH};")
print(f"constexpr int kOptimSteps = {STEPS};")
print(f"constexpr int kOptimParams = {IN * HIDDEN + HIDDEN + HIDDEN * CLASSES + CLASSES};")
print("struct GoldenOptimCase {")
print("  const char* name;")
print("  const char* training;  // the config's training section")
print("  double f32_loss_departure;   // PyTorch float32 vs float64: largest relative loss difference")
print("  double f32_param_departure;  // ... largest |difference| of a final parameter / max |parameter|")
print(f"  double losses[{STEPS}];")
print(f"  double params[{IN * HIDDEN + HIDDEN + HIDDEN * CLASSES + CLASSES}];")
print("};")
print("constexpr GoldenOptimCase kOptimCases[] = {")
for case in CASES:
    ref, p64, clipped, margin = trajectory(case, torch.float64)
    f32, p32, _, _ = trajectory(case, torch.float32)
    dl = max(abs(a - b) / abs(b) for a, b in zip(f32, ref))
    dp = ((p32 - p64).abs().max() / p64.abs().max()).item()
    print(f"    // {case['name']}: gradients clipped on {clipped} of {STEPS} steps; the smallest")
    print(f"    // |relu input| in float64 is {margin:.2g}, so no relu sits on a float32 tie.")
    print(f"    {{\"{case['name']}\", \"{yaml_of(case)}\", {dl:.3g}, {dp:.3g},")
    print("     {" + ", ".join(repr(v) for v in ref) + "},")
    print("     {" + ", ".join(repr(v) for v in p64.tolist()) + "}},")
print("};")
