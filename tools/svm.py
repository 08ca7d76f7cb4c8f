#!/usr/bin/env python3
"""Train a linear SVM on features exported by `hpmc features` and print its
test accuracy: the "external SVM" that the autoencoder's encoder feeds.

    hpmc features configs/fashion_ae.yaml --weights weights/fashion_ae.safetensors
    python3 tools/svm.py runs/fashion_ae

Reads features_{train,test}.npy and labels_{train,test}.npy from the
directory. Needs numpy and scikit-learn (Debian: python3-numpy python3-sklearn).
"""
import argparse
import os
import sys
import time


T0 = time.time()


def step(msg):
    """A progress line with the seconds since the start, shown at once."""
    print(f"[{time.time() - T0:6.1f} s] {msg}", flush=True)


def fail(msg):
    print(f"svm.py: error: {msg}", file=sys.stderr)
    sys.exit(2)


def load(d, split, np):
    paths = [os.path.join(d, f"features_{split}.npy"), os.path.join(d, f"labels_{split}.npy")]
    for p in paths:
        if not os.path.exists(p):
            fail(f"{p} not found; export it with: hpmc features CONFIG --weights FILE "
                 f"--split all --out {d}")
    step(f"loading {paths[0]} ({os.path.getsize(paths[0]) / 1e6:.1f} MB)")
    x, y = np.load(paths[0]), np.load(paths[1])
    if x.ndim != 2 or y.shape != (x.shape[0],):
        fail(f"{paths[0]} is {x.shape} and {paths[1]} is {y.shape}: expected N x D and N")
    if not np.isfinite(x).all():
        fail(f"{paths[0]} holds non-finite values")
    return x, y


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="directory with the exported features (e.g. runs/fashion_ae)")
    ap.add_argument("--limit", type=int, default=0,
                    help="train on the first N training samples only (0: all)")
    ap.add_argument("-C", type=float, default=0.1, help="SVM regularisation (default 0.1)")
    args = ap.parse_args()
    step("importing numpy and scikit-learn")
    try:
        import numpy as np
        from sklearn.preprocessing import StandardScaler
        from sklearn.svm import LinearSVC
    except ImportError as e:
        fail(f"{e}; install python3-numpy and python3-sklearn")

    xtr, ytr = load(args.dir, "train", np)
    xte, yte = load(args.dir, "test", np)
    if args.limit > 0:
        xtr, ytr = xtr[:args.limit], ytr[:args.limit]
    step(f"features: {xtr.shape[0]} train, {xte.shape[0]} test, {xtr.shape[1]} values each")
    step("scaling (StandardScaler on the training features)")
    scaler = StandardScaler().fit(xtr)
    xtr_s, xte_s = scaler.transform(xtr), scaler.transform(xte)
    step(f"fitting a linear SVM (C={args.C}) on {xtr.shape[0]} samples, the long part "
         f"(--limit N trains on fewer)")
    t0 = time.time()
    svm = LinearSVC(C=args.C, dual=False, max_iter=2000)
    svm.fit(xtr_s, ytr)
    fit_s = time.time() - t0
    step(f"fitted in {fit_s:.1f} s; scoring {xte.shape[0]} test samples")
    acc = (svm.predict(xte_s) == yte).mean()
    classes = len(np.unique(ytr))
    step(f"linear SVM (C={args.C}): test accuracy {100 * acc:.2f}% "
         f"(chance {100 / classes:.1f}%), trained in {fit_s:.1f} s")


if __name__ == "__main__":
    main()
