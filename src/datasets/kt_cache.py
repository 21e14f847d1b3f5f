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
from dataclasses import dataclass

from tunebench.errors import UserError
from tunebench.space import ChoiceKnob, ExplicitSpace, NumericKnob

REQUIRED = ("tune_params_keys", "tune_params", "cache")


@dataclass(frozen=True)
class MeasuredRow:
    """One measured configuration: its latency in seconds (None: it failed, ``error`` says why), the
    spread of its repeated timings, and the seconds it took to compile and to benchmark."""

    latency_s: float | None
    latency_std_s: float
    compile_s: float
    benchmark_s: float
    error: str = ""


@dataclass
class MeasuredSpace:
    """A kernel's measured space: its knobs and configs (an :class:`ExplicitSpace` of the measured
    configurations, in file order) and one :class:`MeasuredRow` per config index."""

    name: str
    device: str
    space: ExplicitSpace
    rows: list[MeasuredRow]
    origin: str  # the file it came from
    digest: str  # sha256 of the file's bytes (first 12 hex digits)
    flops: int = 0  # floating-point operations of one run, from the cache's GFLOP/s and times (0: none given)

    @property
    def n_valid(self) -> int:
        return sum(r.latency_s is not None for r in self.rows)

    def stats(self, unit: float = 1.0):
        """The space as the methodology score needs it (:class:`~tunebench.protocol.methodology.SpaceStats`):
        its valid latencies (times ``unit``: 1 for seconds, 1e3 for ms) and the seconds each configuration
        cost (compile + benchmark)."""
        from tunebench.protocol.methodology import SpaceStats

        return SpaceStats.of([r.latency_s * unit for r in self.rows if r.latency_s is not None],
                             [r.compile_s + r.benchmark_s for r in self.rows])


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


def resolve(path: str) -> str:
    """``path`` itself when it is a file, else the shipped file of that name under ``data/``."""
    from tunebench.resources import data_dir

    return path if os.path.isfile(path) or os.path.isabs(path) else data_dir(path)


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
    return MeasuredSpace(name=str(data.get("kernel_name", "kernel")), device=str(data.get("device_name", "?")),
                         space=space, rows=rows, origin=os.path.abspath(path), digest=digest,
                         flops=int(rates[len(rates) // 2]) if rates else 0)
