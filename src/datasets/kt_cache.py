"""Measured spaces from Kernel Tuner's cache files (``.json`` or ``.json.gz``): a kernel's tunable
parameters and, per configuration, its measured time or why it failed, with the seconds compiling and
benchmarking it took. ``target=replay`` serves them as measurements.

Kernel Tuner (van Werkhoven, "Kernel Tuner: A search-optimizing GPU code auto-tuner", FGCS 2019) writes
one cache per kernel and device: ``tune_params_keys`` (parameter order), ``tune_params`` (the values of
each), ``objective`` and ``cache`` (``"v1,v2,..."`` -> the configuration's parameters, ``time`` in ms or
an error name such as ``"InvalidConfig"``, ``compile_time`` and ``benchmark_time`` in ms, ``times``).
The shipped cache is ``data/kernel_tuner/convolution_MI50.json.gz`` (data/kernel_tuner/README.md).
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import math
import os

from tunebench.datasets.measured import MeasuredRow, MeasuredSpace
from tunebench.errors import UserError
from tunebench.explicit_space import ExplicitSpace
from tunebench.space import ChoiceKnob, NumericKnob

REQUIRED = ("tune_params_keys", "tune_params", "cache")


def _read_json(path: str) -> tuple[dict, str]:
    """The cache's data and the sha256 of its bytes (first 12 hex digits)."""
    if not os.path.isfile(path):
        raise UserError(f"model.path={path}: no such file")
    raw = open(path, "rb").read()
    try:
        text = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
        data = json.loads(text)
    except (OSError, EOFError, ValueError) as exc:
        raise UserError(f"model.path={path}: not a readable JSON cache (corrupt or truncated?): {exc}") from None
    if not isinstance(data, dict) or any(k not in data for k in REQUIRED):
        have = ", ".join(sorted(data)[:8]) if isinstance(data, dict) else type(data).__name__
        raise UserError(f"model.path={path}: not a Kernel Tuner cache (needs keys {', '.join(REQUIRED)}; has {have})")
    return data, hashlib.sha256(raw).hexdigest()[:12]


def _seconds(ms) -> float:
    return float(ms) / 1e3 if isinstance(ms, (int, float)) and math.isfinite(ms) else 0.0


def _row(entry: dict, key: str, path: str) -> MeasuredRow:
    time_ms = entry.get("time")
    times = [t for t in entry.get("times") or [] if isinstance(t, (int, float))]
    if isinstance(time_ms, (int, float)) and math.isfinite(time_ms) and time_ms > 0:
        mean = sum(times) / len(times) if times else time_ms
        std = math.sqrt(sum((t - mean) ** 2 for t in times) / (len(times) - 1)) if len(times) > 1 else 0.0
        return MeasuredRow(time_ms / 1e3, std / 1e3, _seconds(entry.get("compile_time")),
                           _seconds(entry.get("benchmark_time")))
    if isinstance(time_ms, str) and time_ms:
        return MeasuredRow(None, 0.0, _seconds(entry.get("compile_time")), _seconds(entry.get("benchmark_time")),
                           error=time_ms)
    raise UserError(f"model.path={path}: cache entry {key!r} has time {time_ms!r}: neither milliseconds nor an "
                    "error name")


@functools.cache
def read_cache(path: str) -> MeasuredSpace:
    """The measured space of a Kernel Tuner cache file.

    Raises:
        UserError: a missing, unreadable or corrupt file; a JSON file of another format; an entry whose
            parameters are not among ``tune_params`` or whose time is neither a number nor an error name.
    """
    data, digest = _read_json(path)
    keys = list(data["tune_params_keys"])
    params = data["tune_params"]
    if not keys or not isinstance(params, dict) or set(keys) - set(params):
        raise UserError(f"model.path={path}: tune_params_keys {keys} do not match tune_params")
    knobs = [NumericKnob(k, tuple(params[k])) if all(isinstance(v, (int, float)) for v in params[k])
             else ChoiceKnob(k, tuple(params[k])) for k in keys]
    positions = [{v: i for i, v in enumerate(params[k])} for k in keys]
    digit_rows, rows = [], []
    for key, entry in data["cache"].items():
        try:
            digit_rows.append([pos[entry[k]] for pos, k in zip(positions, keys)])
        except (KeyError, TypeError):
            raise UserError(f"model.path={path}: cache entry {key!r} has parameters outside tune_params") from None
        rows.append(_row(entry, key, path))
    if not rows:
        raise UserError(f"model.path={path}: the cache holds no configuration")
    space = ExplicitSpace(knobs, digit_rows)
    if space.size != len(rows):
        raise UserError(f"model.path={path}: the cache lists a configuration twice")
    rates = sorted(e["GFLOP/s"] * 1e9 * r.latency_s for e, r in zip(data["cache"].values(), rows)
                   if r.latency_s is not None and isinstance(e.get("GFLOP/s"), (int, float)))
    return MeasuredSpace(name=str(data.get("kernel_name", "kernel")), device=str(data.get("device_name") or "?"),
                         space=space, rows=rows, origin=os.path.abspath(path), digest=digest,
                         flops=int(rates[len(rates) // 2]) if rates else 0)
