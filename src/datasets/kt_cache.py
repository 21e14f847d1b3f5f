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

from tunebench.config.knobs import is_num, short
from tunebench.datasets.measured import MeasuredRow, MeasuredSpace, recorded_number
from tunebench.errors import UserError
from tunebench.listed_space import ListedSpace
from tunebench.search_space import ChoiceKnob, NumericKnob

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


def _row(entry: dict, where: str) -> MeasuredRow:
    """One entry's row: ``time`` in ms (finite, > 0) or an error name (a failed configuration: an invalid
    measurement); ``times``, ``compile_time``, ``benchmark_time`` finite and >= 0 where present."""
    time_ms = entry.get("time")
    compile_s = recorded_number(where, "compile_time", entry.get("compile_time"), default=0.0) / 1e3
    bench_s = recorded_number(where, "benchmark_time", entry.get("benchmark_time"), default=0.0) / 1e3
    if isinstance(time_ms, str) and time_ms and not _numeric(time_ms):
        return MeasuredRow(None, 0.0, compile_s, bench_s, error=time_ms)
    if not isinstance(time_ms, (int, float)) or isinstance(time_ms, bool):
        raise UserError(f"{where}: time={time_ms!r}: neither milliseconds nor an error name")
    time_ms = recorded_number(where, "time", time_ms, positive=True)
    times = entry.get("times") or []
    if not isinstance(times, list):
        raise UserError(f"{where}: times={times!r}: must be a list of milliseconds")
    times = [recorded_number(where, "times", t, positive=True) for t in times]
    return MeasuredRow(time_ms / 1e3, _std(times) / 1e3, compile_s, bench_s)


def _numeric(text: str) -> bool:
    """Whether ``text`` reads as a number ("12", "nan"): a number written as text, not an error name."""
    try:
        float(text)
    except ValueError:
        return False
    return True


def _std(times: list[float]) -> float:
    """The sample standard deviation of ``times`` (0 for fewer than two), scaled so that no square overflows."""
    if len(times) < 2:
        return 0.0
    scale = max(times)
    mean = sum(t / scale for t in times) / len(times)
    return scale * math.sqrt(sum((t / scale - mean) ** 2 for t in times) / (len(times) - 1))


def _digits(entry, key: str, keys: list[str], positions: list[dict], where: str) -> list[int]:
    """The entry's index into each parameter's values: every parameter of ``tune_params_keys`` present, of
    the type ``tune_params`` lists it with (16.0 is not 16), and the entry's key the comma-joined values,
    as Kernel Tuner writes it (an entry edited apart from its key, or a parameter the header does not
    declare, is refused)."""
    if not isinstance(entry, dict):
        raise UserError(f"{where}: not a mapping of parameters and results")
    try:
        digits = [pos[(type(entry[k]), entry[k])] for pos, k in zip(positions, keys)]
    except (KeyError, TypeError):
        raise UserError(f"{where}: parameters outside tune_params (valid: {', '.join(keys)}, each with the values "
                        "tune_params lists)") from None
    if key != ",".join(str(entry[k]) for k in keys):
        raise UserError(f"{where}: the key is not the values of tune_params_keys ({', '.join(keys)}) joined by "
                        "commas: a parameter tune_params does not declare, or an edited entry")
    return digits


def _scalar(v) -> bool:
    return isinstance(v, (str, bool, int)) or is_num(v)


@functools.cache
def read_cache(path: str) -> MeasuredSpace:
    """The measured space of a Kernel Tuner cache file.

    Raises:
        UserError: a missing, unreadable or corrupt file; a JSON file of another format; an entry whose
            parameters are not among ``tune_params`` or whose time is neither a number nor an error name.
    """
    data, digest = _read_json(path)
    keys, params = data["tune_params_keys"], data["tune_params"]
    if (not isinstance(keys, list) or not keys or not isinstance(params, dict) or set(keys) != set(params)
            or any(not isinstance(params[k], list) or not params[k] or not all(map(_scalar, params[k])) for k in keys)):
        raise UserError(f"model.path={path}: tune_params_keys {short(keys)} do not match tune_params (the same "
                        "parameters, each with a non-empty list of numbers or strings)")
    if not isinstance(data["cache"], dict) or not data["cache"]:
        raise UserError(f"model.path={path}: the cache holds no configuration")
    knobs = [NumericKnob(k, tuple(params[k])) if all(is_num(v) for v in params[k])
             else ChoiceKnob(k, tuple(params[k])) for k in keys]
    positions = [{(type(v), v): i for i, v in enumerate(params[k])} for k in keys]
    digit_rows, rows = [], []
    for key, entry in data["cache"].items():
        where = f"model.path={path}: cache entry {key!r}"
        digit_rows.append(_digits(entry, key, keys, positions, where))
        rows.append(_row(entry, where))
    space = ListedSpace(knobs, digit_rows)
    if space.size != len(rows):
        raise UserError(f"model.path={path}: the cache lists a configuration twice")
    rates = sorted(e["GFLOP/s"] * 1e9 * r.latency_s for e, r in zip(data["cache"].values(), rows)
                   if r.latency_s is not None and is_num(e.get("GFLOP/s")) and e["GFLOP/s"] > 0)
    return MeasuredSpace(name=str(data.get("kernel_name", "kernel")), device=str(data.get("device_name") or "?"),
                         space=space, rows=rows, origin=os.path.abspath(path), digest=digest,
                         flops=int(rates[len(rates) // 2]) if rates else 0)
