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


def fail(msg):
    print(f"svm.py: error: {msg}", file=sys.stderr)
    sys.exit(2)


def load(d, split, np):
    paths = [os.path.join(d, f"features_{split}.npy"), os.path.join(d, f"labels_{split}.npy")]
    for p in paths:
        if not os.path.exists(p):
            fail(f"{p} not found; export it with: hpmc features CONFIG --weights FILE "
                 f"--split all --out {d}")
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
    print(f"features: {xtr.shape[0]} train, {xte.shape[0]} test, {xtr.shape[1]} values each")
    t0 = time.time()
    scaler = StandardScaler().fit(xtr)
    svm = LinearSVC(C=args.C, dual=False, max_iter=2000)
    svm.fit(scaler.transform(xtr), ytr)
    acc = (svm.predict(scaler.transform(xte)) == yte).mean()
    classes = len(np.unique(ytr))
    print(f"linear SVM (C={args.C}): test accuracy {100 * acc:.2f}% "
          f"(chance {100 / classes:.1f}%), trained in {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
