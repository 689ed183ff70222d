#!/usr/bin/env python3
"""Goldens for multivariate_normal with method='svd' and 'eigh' (Generator) and
RandomState.multivariate_normal (svd), recorded from the real NumPy (LAPACK dgesdd / dsyevd of
its OpenBLAS), written to tests/golden/numpy_mvn_lapack.json.

    python3 tools/golden_mvn_lapack.py                 # the committed golden file
    python3 tools/golden_mvn_lapack.py --stress N OUT  # N random covariances per family, to OUT

Each case is a `lockstep sample` call (`args`) with NumPy's values, compared within `rtol` of
the largest magnitude (NumPy calls LAPACK/BLAS there). Extra keys the CLI test ignores:
`warns` (NumPy's RuntimeWarning "covariance is not symmetric positive-semidefinite." was
raised), `family`. `refusals` lists calls NumPy refuses with check_valid='raise'.
Only families whose singular values / eigenvalues are separated, or exactly repeated in a
diagonal matrix, are in the golden file; the stress mode also writes the rest (`family`
tells which) so that the limits stated in the docs can be measured.
"""

import json
import os
import platform
import sys
import warnings

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "tests", "golden", "numpy_mvn_lapack.json")
RTOL = 1e-12


def text(v):
    return ",".join(repr(float(x)) for x in v)


def call(lib, seed, mean, cov, size, method, check_valid, tol):
    """NumPy's values, whether it warned, and the error it raised (or None)."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            if lib == "numpy":
                g = np.random.default_rng(seed)
                r = g.multivariate_normal(mean, cov, size=size, check_valid=check_valid, tol=tol,
                                          method=method)
            else:
                rs = np.random.RandomState(seed)
                r = rs.multivariate_normal(mean, cov, size=size, check_valid=check_valid, tol=tol)
        except (ValueError, np.linalg.LinAlgError) as e:
            return None, False, f"{type(e).__name__}: {e}"
    warns = any("positive-semidefinite" in str(x.message) for x in w)
    return r, warns, None


def args_of(lib, seed, mean, cov, size, method, check_valid, tol):
    a = [lib, "multivariate_normal", f"--seed={seed}", f"--mean={text(mean)}",
         f"--cov={text(np.asarray(cov).reshape(-1))}"]
    if lib == "numpy":
        a.append(f"--method={method}")
    a += [f"--check-valid={check_valid}", f"--tol={tol!r}"]
    if size is not None:
        a.append(f"--shape={size}" if isinstance(size, int) else "--shape=" + ",".join(map(str, size)))
    return a


def rotation(rng, d):
    q, r = np.linalg.qr(rng.standard_normal((d, d)))
    return q * np.sign(np.diag(r))


def families(rng, d):
    """(family, mean, cov) for dimension d; the family says what kind of spectrum it has."""
    mean = list(rng.standard_normal(d).round(3))
    out = []
    a = rng.standard_normal((d, d))
    out.append(("spd", mean, a @ a.T + 0.1 * d * np.eye(d)))
    # separated spectrum with a wide range (condition ~1e6)
    q = rotation(rng, d)
    ev = np.logspace(-3, 3, d) if d > 1 else np.array([2.0])
    out.append(("spread", mean, (q * ev) @ q.T))
    out.append(("diag", mean, np.diag(rng.uniform(0.1, 5.0, d))))
    out.append(("identity", mean, np.eye(d)))
    out.append(("diag_repeated", mean, np.diag(np.repeat([2.0, 0.5], (d + 1) // 2)[:d])))
    # beyond dgesdd's/dsyevd's scaling thresholds; mean 0 so that the factor is what is compared
    out.append(("scaled_big", [0.0] * d, (a @ a.T + d * np.eye(d)) * 1e150))
    out.append(("scaled_small", [0.0] * d, (a @ a.T + d * np.eye(d)) * 1e-150))
    if d > 1:
        # symmetric with a negative eigenvalue: not PSD
        ev2 = np.linspace(0.5, 3.0, d)
        ev2[0] = -0.37  # |−0.37| apart from the rest: separated singular values
        out.append(("indefinite", mean, (q * ev2) @ q.T))
        # not symmetric
        out.append(("nonsymmetric", mean, a @ a.T + d * np.eye(d) + 0.3 * np.triu(np.ones((d, d)), 1)))
        # limits (stress mode only): repeated eigenvalues in a rotated basis, rank deficiency
        k = max(1, d // 2)
        b = rng.standard_normal((d, k))
        out.append(("rank_deficient", mean, b @ b.T))
        ev3 = np.concatenate([np.full(k, 1.5), np.linspace(2.0, 4.0, d - k)])
        out.append(("rotated_repeated", mean, (q * ev3) @ q.T))
    return out


EXACT = {"spd", "spread", "diag", "identity", "diag_repeated", "scaled_big", "scaled_small",
         "indefinite", "nonsymmetric"}


def golden():
    rng = np.random.RandomState(20261130)
    cases, refusals = [], []
    dims = [1, 2, 3, 4, 5, 6, 8, 10, 13, 16, 25]
    seeds = [0, 7, 2**40 + 5]
    for d in dims:
        for fam, mean, cov in families(rng, d):
            if fam not in EXACT:
                continue
            # 7 significant digits keep the file small; NumPy is given the rounded cov itself.
            cov = np.vectorize(lambda x: float(f"{x:.7g}"))(cov)
            for lib in ["numpy", "numpy-legacy"]:
                methods = ["svd", "eigh"] if lib == "numpy" else ["svd"]
                for method in methods:
                    for i, seed in enumerate(seeds):
                        if d > 10 and i > 0:  # keep the file small: one call per large cov
                            continue
                        if lib == "numpy-legacy" and seed >= 2**32:
                            seed = 2**32 - 1
                        size = [None, 6, (2, 3)][i]
                        check, tol = [("warn", 1e-8), ("ignore", 1e-8), ("warn", 1e-3)][i]
                        r, warns, err = call(lib, seed, mean, cov, size, method, check, tol)
                        assert err is None, (fam, d, err)
                        cases.append({
                            "args": args_of(lib, seed, mean, cov, size, method, check, tol),
                            "dtype": "float64", "rtol": RTOL, "family": fam, "warns": warns,
                            "values": [float(v) for v in np.asarray(r).reshape(-1)],
                        })
                    if fam in ("indefinite", "nonsymmetric"):
                        r, warns, err = call(lib, 3, mean, cov, 2, method, "raise", 1e-8)
                        a = args_of(lib, 3, mean, cov, 2, method, "raise", 1e-8)
                        if err is None:  # eigh reads the lower triangle only
                            cases.append({"args": a, "dtype": "float64", "rtol": RTOL,
                                          "family": fam, "warns": warns,
                                          "values": [float(v) for v in np.asarray(r).reshape(-1)]})
                        else:
                            refusals.append({"args": a, "family": fam, "error": err})
    # tol at the edge of the check: an indefinite cov whose negative eigenvalue is -1e-6.
    q = rotation(rng, 3)
    cov = (q * np.array([-1e-6, 1.0, 2.0])) @ q.T
    for tol in [1e-8, 1e-5]:
        for method in ["svd", "eigh"]:
            for check in ["warn", "raise"]:
                r, warns, err = call("numpy", 1, [0.0, 1.0, 2.0], cov, 4, method, check, tol)
                a = args_of("numpy", 1, [0.0, 1.0, 2.0], cov, 4, method, check, tol)
                if err is None:
                    cases.append({"args": a, "dtype": "float64", "rtol": RTOL, "family": "tol",
                                  "warns": warns,
                                  "values": [float(v) for v in np.asarray(r).reshape(-1)]})
                else:
                    refusals.append({"args": a, "family": "tol", "error": err})
    return cases, refusals


def stress(n):
    rng = np.random.RandomState(1)
    cases = []
    for rep in range(n):
        for d in range(1, 26):
            for fam, mean, cov in families(rng, d):
                for lib, method in [("numpy", "svd"), ("numpy", "eigh"), ("numpy-legacy", "svd")]:
                    seed = rep * 1000 + d
                    r, warns, err = call(lib, seed, mean, cov, 5, method, "ignore", 1e-8)
                    if err is not None:
                        continue
                    cases.append({"args": args_of(lib, seed, mean, cov, 5, method, "ignore", 1e-8),
                                  "dtype": "float64", "rtol": RTOL, "family": fam, "warns": warns,
                                  "values": [float(v) for v in np.asarray(r).reshape(-1)]})
    return cases


def write(path, cases, refusals):
    doc = {
        "generator": "tools/golden_mvn_lapack.py",
        "library": f"numpy {np.__version__}",
        "lapack": np.show_config(mode="dicts")["Build Dependencies"]["lapack"].get("version", "?"),
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "cases": cases,
        "refusals": refusals,
    }
    with open(path, "w") as f:
        json.dump(doc, f, indent=None, separators=(",", ":"))
        f.write("\n")
    print(f"{path}: {len(cases)} cases, {len(refusals)} refusals")


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "--stress":
        write(sys.argv[3], stress(int(sys.argv[2])), [])
    else:
        cases, refusals = golden()
        write(OUT, cases, refusals)


if __name__ == "__main__":
    main()
