"""Helpers shared by the benchmark scripts: where results go, what machine made them, its load.

Results go to the untracked ``benchmarks/results/local/<name>.json`` by default; ``--publish``
writes the tracked ``benchmarks/results/<name>.json`` (the file docs/BENCHMARKS.md cites), and
``--out PATH`` anywhere else.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def add_out_args(ap: argparse.ArgumentParser, name: str) -> None:
    """``--out`` and ``--publish`` for the result file ``<name>.json``."""
    ap.add_argument("--out", default=None,
                    help=f"result file (default: benchmarks/results/local/{name}.json, untracked)")
    ap.add_argument("--publish", action="store_true",
                    help=f"write the tracked benchmarks/results/{name}.json instead")


def out_path(ap: argparse.ArgumentParser, args: argparse.Namespace, name: str) -> str:
    """The result file the arguments ask for (``--out`` and ``--publish`` together are an error)."""
    if args.publish and args.out:
        ap.error("--out and --publish exclude each other")
    if args.publish:
        return os.path.join(RESULTS, f"{name}.json")
    return args.out or os.path.join(RESULTS, "local", f"{name}.json")


def _finite(o):
    """``o`` with every NaN or infinity replaced by None (strict JSON)."""
    if isinstance(o, float):
        return o if math.isfinite(o) else None
    if isinstance(o, dict):
        return {k: _finite(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_finite(v) for v in o]
    return o


def write_json(path: str, data: dict) -> None:
    """Write ``data`` atomically (``tunebench.safe_files.atomic_write_bytes``); NaN becomes null."""
    from tunebench.safe_files import atomic_write_bytes

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    text = json.dumps(_finite(data), indent=1, allow_nan=False) + "\n"
    atomic_write_bytes(path, text.encode(), mode=0o644)


def spearman(a, b, min_n: int = 2) -> float:
    """Spearman's rho of ``a`` and ``b`` (average ranks for ties); NaN where it is undefined: fewer than
    ``min_n`` pairs or a constant side."""
    from scipy.stats import spearmanr

    if len(a) < min_n or len(set(a)) < 2 or len(set(b)) < 2:
        return math.nan
    return float(spearmanr(a, b).statistic)


def timed_inside(owner, inside: list, hooks: tuple[str, ...] = ("ask", "tell")) -> None:
    """Wrap the methods ``hooks`` of ``owner`` (a method class, or one method object) so that their wall
    time adds up in ``inside[0]``: the time a tuning method spends in its own computation."""
    for hook in hooks:
        original = getattr(owner, hook)  # on a class: the function (self comes in args); on an object: bound

        def wrapped(*args, _original=original, **kwargs):
            t0 = time.perf_counter()
            try:
                return _original(*args, **kwargs)
            finally:
                inside[0] += time.perf_counter() - t0

        setattr(owner, hook, wrapped)


def loadavg() -> list[float] | None:
    """The 1, 5 and 15-minute load averages (``os.getloadavg``), or None where there are none."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def machine_info() -> dict:
    """CPU model, host, logical CPUs, Python, TVM and PyTorch versions."""
    import torch

    from tunebench.targets.tvm.llvm import cpu_model_name
    from tunebench.targets.tvm.target import tvm_version

    return {"cpu": cpu_model_name(), "host": platform.node(), "cores": os.cpu_count(),
            "python": sys.version.split()[0], "tvm": tvm_version(), "torch": torch.__version__}


def provenance() -> dict:
    """Date and time (local) and the git commit of the tunebench sources ("-dirty" when modified)."""
    from tunebench.harness.run_folder import git_commit

    return {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "git_commit": git_commit()}


def records_args(doc: str, baseline: str, what: str, csv: str | None = None) -> argparse.Namespace:
    """The arguments of a table made from run-records folders: ``records_dirs`` (one or more: sweeps
    run from several clones or machines are read together), ``--baseline`` (default ``baseline``, the
    ``what`` ratios are taken against), ``--tracking-uri`` (default: the ``mlflow.db`` beside each records
    folder when it exists; ``tracking_uris`` is filled in, one per folder) and, with ``csv`` (what the file
    holds), ``--csv PATH``; then a CSV file that ``--csv`` wrote may stand for a records folder."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("records_dirs", nargs="+", metavar="records_dir" + ("|csv" if csv else ""))
    ap.add_argument("--baseline", default=baseline, help=f"the {what} the ratios are taken against")
    ap.add_argument("--tracking-uri", default=None,
                    help="MLflow store of the runs (default: sqlite:///<records_dir>/../mlflow.db of each folder "
                         "when it exists)")
    if csv:
        ap.add_argument("--csv", metavar="PATH", default=None, help=f"also write {csv} to PATH")
    a = ap.parse_args()
    for d in a.records_dirs:
        if csv and d.endswith(".csv"):
            if not os.path.isfile(d):
                ap.exit(2, f"error: CSV file {d!r} does not exist\n")
        elif not os.path.isdir(d):
            ap.exit(2, f"error: records folder {d!r} does not exist (give the records/ folder of a sweep"
                       f"{' or a CSV file --csv wrote' if csv else ''})\n")
    a.tracking_uris = [None if csv and d.endswith(".csv") else a.tracking_uri or default_tracking_uri(d)
                       for d in a.records_dirs]
    return a


def default_tracking_uri(records_dir: str) -> str | None:
    """``sqlite:///<records_dir>/../mlflow.db`` when that file exists (the layout ``run.py`` writes)."""
    db = os.path.join(os.path.dirname(os.path.abspath(records_dir)), "mlflow.db")
    return f"sqlite:///{db}" if os.path.exists(db) else None


def usage_error(message: str) -> None:
    """A table's bad input: ``error: <message>`` on one line of stderr, exit 2."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def matmul_model(sizes: list[int]):
    """``--product M N K``: an M x N x K matrix product as a one-layer model (a dense layer: batch M,
    out_features N, in_features K); a size below 1 is a usage error."""
    if min(sizes) < 1:
        usage_error(f"--product {' '.join(map(str, sizes))}: every size must be at least 1")
    from tunebench.datasets.models import LayersModel

    m, n, k = sizes
    return LayersModel(name=f"matmul_{m}x{n}x{k}", layers=[{"batch": m, "out_features": n, "in_features": k}])


CRASH = 4  # exit code of an unexpected error (a traceback), distinct from every verdict


def run_main(main) -> int:
    """``main()``'s exit code; a :class:`~tunebench.errors.UserError` prints ``error: ...`` and
    gives 2, any other exception its traceback and :data:`CRASH`."""
    import traceback

    from tunebench.errors import UserError

    try:
        return main()
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception:
        traceback.print_exc()
        return CRASH
