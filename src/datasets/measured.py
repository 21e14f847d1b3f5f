"""A measured space: a task's configurations, each with its recorded latency or failure and the seconds
measuring it took. Read from Kernel Tuner caches (:mod:`tunebench.datasets.kt_cache`) and tunebench's
own space files (:mod:`tunebench.datasets.space_file`); ``target=replay`` serves it as measurements."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

from tunebench.errors import UserError
from tunebench.listed_space import ListedSpace

_MISSING = object()


def recorded_number(where: str, name: str, value, *, positive: bool = False, default=_MISSING) -> float:
    """A number read from a measured file, checked: finite and >= 0 (> 0 when ``positive``); ``value``
    None or absent gives ``default`` where one is given. ``where`` names the file and line or entry.

    Raises:
        UserError: anything else (a string, a bool, a list, a negative, zero where positive, NaN or
            infinite value), naming ``where``, the field and the value: a replayed run must never report it.
    """
    if value is None and default is not _MISSING:
        return default
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (positive and value == 0):
        what = "a finite number > 0" if positive else "a finite number >= 0"
        raise UserError(f"{where}: {name}={value!r}: must be {what}")
    return float(value)


@dataclass(frozen=True)
class MeasuredRow:
    """One measured configuration: its latency in seconds (None: it failed, ``error`` says why), the
    spread of its repeated timings, and the seconds it took to compile and to benchmark."""

    latency_s: float | None
    latency_std_s: float
    compile_s: float
    benchmark_s: float
    error: str = ""
    noisy: bool = False  # the protocol marked the timing noisy (tunebench space files)


@dataclass
class MeasuredSpace:
    """A kernel's measured space: its knobs and configs (a :class:`ListedSpace` of the measured
    configurations, in file order) and one :class:`MeasuredRow` per config index."""

    name: str
    device: str
    space: ListedSpace
    rows: list[MeasuredRow]
    origin: str  # the file it came from
    digest: str  # sha256 of the file's bytes (first 12 hex digits)
    flops: int = 0  # floating-point operations of one run, from the cache's GFLOP/s and times (0: none given)
    meta: dict = field(default_factory=dict)  # a space file's header (tunebench.datasets.space_file); {} for caches

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


def resolve(path: str) -> str:
    """``path`` itself when it is a file, else the shipped file of that name under ``data/``."""
    from tunebench.resources import data_dir

    return path if os.path.isfile(path) or os.path.isabs(path) else data_dir(path)
