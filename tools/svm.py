#!/usr/bin/env python3
"""Train an SVM on features exported by `hpmc features` and print its test
accuracy: the "external SVM" that the autoencoder's encoder feeds.

    hpmc features configs/fashion_ae.yaml --weights weights/fashion_ae.safetensors
    python3 tools/svm.py runs/fashion_ae
    python3 tools/svm.py runs/cifar_ae --kernel rbf --limit 5000 --C 10

Reads the train and test features from the directory, in the first format
found (or the one --format names): features_{train,test}.npy with
labels_{train,test}.npy, features_{train,test}.libsvm, or
features_{train,test}.csv. `--kernel linear` (the default) trains
scikit-learn's LinearSVC, `--kernel rbf` its SVC with an RBF kernel, whose
training time grows about quadratically with the samples: use --limit.
Needs numpy and scikit-learn (Debian: python3-numpy python3-sklearn).
"""
import argparse
import os
import sys
import time


T0 = time.time()
FORMATS = ("npy", "libsvm", "csv")


def step(msg):
    """A progress line with the seconds since the start, shown at once."""
    print(f"[{time.time() - T0:6.1f} s] {msg}", flush=True)


def fail(msg):
    print(f"svm.py: error: {msg}", file=sys.stderr)
    sys.exit(2)


def files_of(d, fmt, split):
    if fmt == "npy":
        return [os.path.join(d, f"features_{split}.npy"), os.path.join(d, f"labels_{split}.npy")]
    return [os.path.join(d, f"features_{split}.{fmt}")]


def pick_format(d, asked):
    if asked != "auto":
        return asked
    for fmt in FORMATS:
        if all(os.path.exists(p) for s in ("train", "test") for p in files_of(d, fmt, s)):
            return fmt
    fail(f"no exported features in {d} (features_train/_test as .npy with labels_*.npy, "
         f".libsvm or .csv); export them with: hpmc features CONFIG --weights FILE "
         f"--split all --out {d}")


def load_npy(d, split, np):
    x_path, y_path = files_of(d, "npy", split)
    x, y = np.load(x_path), np.load(y_path)
    if x.ndim != 2 or y.shape != (x.shape[0],):
        fail(f"{x_path} is {x.shape} and {y_path} is {y.shape}: expected N x D and N")
    return x, y


def load_csv(d, split, np):
    path = files_of(d, "csv", split)[0]
    with open(path) as f:
        header = f.readline()
    if not header.startswith("label,"):
        fail(f"{path} has no label column (its rows are keyed by '{header.split(',')[0]}'), "
             f"so there is nothing to train on")
    data = np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.float32, ndmin=2)
    return data[:, 1:], data[:, 0].astype(np.int32)


def load(d, fmt, np):
    """(x_train, y_train, x_test, y_test) as dense float32 and int arrays."""
    for split in ("train", "test"):
        for p in files_of(d, fmt, split):
            if not os.path.exists(p):
                fail(f"{p} not found; export it with: hpmc features CONFIG --weights FILE "
                     f"--split all --format {'all' if fmt == 'libsvm' else fmt} --out {d}")
    def mb(path):
        return f"{os.path.getsize(path) / 1e6:.1f} MB"
    if fmt == "libsvm":
        from sklearn.datasets import load_svmlight_files
        paths = files_of(d, fmt, "train") + files_of(d, fmt, "test")
        step(f"loading {paths[0]} ({mb(paths[0])}) and {paths[1]} ({mb(paths[1])})")
        # One call, so that both splits get the same number of features
        # (zeros at the end of a row are left out of it).
        xtr, ytr, xte, yte = load_svmlight_files(paths, dtype=np.float32)
        xtr, xte = xtr.toarray(), xte.toarray()
        ytr, yte = ytr.astype(np.int32), yte.astype(np.int32)
    else:
        loader = load_npy if fmt == "npy" else load_csv
        path = files_of(d, fmt, "train")[0]
        step(f"loading {path} ({mb(path)})")
        xtr, ytr = loader(d, "train", np)
        path = files_of(d, fmt, "test")[0]
        step(f"loading {path} ({mb(path)})")
        xte, yte = loader(d, "test", np)
    if xtr.shape[1] != xte.shape[1]:
        fail(f"the train features have {xtr.shape[1]} values each and the test features "
             f"{xte.shape[1]}: export both from one model")
    for name, x in (("train", xtr), ("test", xte)):
        if not np.isfinite(x).all():
            fail(f"the {name} features in {d} hold non-finite values")
    return xtr, ytr, xte, yte


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="directory with the exported features (e.g. runs/fashion_ae)")
    ap.add_argument("--format", choices=("auto",) + FORMATS, default="auto",
                    help="which export to read (default: the first of npy, libsvm, csv found)")
    ap.add_argument("--kernel", choices=("linear", "rbf"), default="linear",
                    help="linear: LinearSVC (fast); rbf: SVC with an RBF kernel (slow, see --limit)")
    ap.add_argument("--limit", type=int, default=0,
                    help="train on the first N training samples only (0: all)")
    ap.add_argument("--C", "-C", dest="C", type=float, default=None,
                    help="SVM regularisation (default 0.1 for linear, 1.0 for rbf)")
    ap.add_argument("--gamma", default="scale",
                    help="RBF kernel width: a number, 'scale' (default: 1 / (D * variance)) or "
                         "'auto' (1 / D)")
    args = ap.parse_args()
    if args.limit < 0:
        fail(f"--limit {args.limit}: give a number of samples, or 0 for all")
    C = args.C if args.C is not None else (0.1 if args.kernel == "linear" else 1.0)
    if not C > 0:
        fail(f"--C {C}: must be positive")
    gamma = args.gamma
    if gamma not in ("scale", "auto"):
        try:
            gamma = float(gamma)
        except ValueError:
            fail(f"--gamma {args.gamma}: give a positive number, 'scale' or 'auto'")
        if not gamma > 0:
            fail(f"--gamma {args.gamma}: must be positive")

    step("importing numpy and scikit-learn")
    try:
        import numpy as np
        from sklearn.preprocessing import StandardScaler
        from sklearn.svm import SVC, LinearSVC
    except ImportError as e:
        fail(f"{e}; install python3-numpy and python3-sklearn")

    fmt = pick_format(args.dir, args.format)
    xtr, ytr, xte, yte = load(args.dir, fmt, np)
    if args.limit > 0:
        xtr, ytr = xtr[:args.limit], ytr[:args.limit]
    n, dim = xtr.shape
    # A LIBSVM row leaves out its zeros, so columns that are zero in every row
    # at the end are not there to count (they would not change the SVM).
    step(f"features: {n} train, {xte.shape[0]} test, {dim} values each"
         + (" (up to the highest index present)" if fmt == "libsvm" else ""))
    step("scaling (StandardScaler on the training features)")
    scaler = StandardScaler().fit(xtr)
    xtr_s, xte_s = scaler.transform(xtr), scaler.transform(xte)
    if args.kernel == "linear":
        what = f"a linear SVM (C={C})"
        svm = LinearSVC(C=C, dual=False, max_iter=2000)
        step(f"fitting {what} on {n} samples, the long part (--limit N trains on fewer)")
    else:
        what = f"an RBF SVM (C={C}, gamma={gamma})"
        svm = SVC(kernel="rbf", C=C, gamma=gamma, cache_size=1000)
        # libsvm's SMO solver: kernel rows of all n samples, over many passes.
        step(f"note: an RBF SVM's fit grows about quadratically with the samples (and linearly "
             f"with the {dim} values each) and runs on one core: a few thousand samples take "
             f"seconds to minutes, all 50,000 of CIFAR-10 can take hours; --limit N trains on "
             f"the first N, and the README shows GPU SVMs for the full set")
        step(f"fitting {what} on {n} samples, the long part")
    t0 = time.time()
    svm.fit(xtr_s, ytr)
    fit_s = time.time() - t0
    step(f"fitted in {fit_s:.1f} s; scoring {xte.shape[0]} test samples")
    acc = (svm.predict(xte_s) == yte).mean()
    classes = len(np.unique(ytr))
    step(f"{what}: test accuracy {100 * acc:.2f}% (chance {100 / classes:.1f}%), trained in "
         f"{fit_s:.1f} s")
    step(f"done in {time.time() - T0:.1f} s")


if __name__ == "__main__":
    main()
