"""The quiet reference a calibration's ``slowdown`` is judged against (``measure.noise.reference``).

``run`` (the default): the run's first clean calibration is its reference, renewed by the first clean
calibration after ``reference_max_age_s`` (a long run follows the machine's clock, which moves on a VM
within one boot). ``slowdown`` then says how much slower the machine became since then: a busy period
the other signals did not see.

``machine``: the fastest clean calibration ever seen under the machine's cache key (the strict rule).
On a VM one key can mean hosts of different speed from one boot to the next, so a quiet machine can
read as 1.5-2x slower than its lucky best (docs/MEASUREMENT.md §The quiet reference).

Either way every clean calibration is offered to the machine cache, and its fastest is reported beside
absolute times as ``host_slowdown`` (how this machine compares with its best day), never as a mark.
"""

from __future__ import annotations

import time
from collections.abc import Callable

#: the values of ``measure.noise.reference``
REFERENCES = ("run", "machine")


class CalibrationReference:
    """The reference of one run (one target instance).

    Args:
        kind: ``run`` or ``machine`` (:data:`REFERENCES`).
        machine: the machine cache (``calibration_reference()``, ``offer_calibration(seconds)``; None: none).
        max_age_s: ``run``: a reference older than this is renewed by the next clean calibration.
        clock: seconds, monotonic (tests pass a fake one).
    """

    def __init__(self, kind: str, machine=None, max_age_s: float = 3600.0,
                 clock: Callable[[], float] = time.monotonic):
        if kind not in REFERENCES:
            raise ValueError(f"reference {kind!r}: valid: {', '.join(REFERENCES)}")
        self.kind, self.machine, self.max_age_s, self.clock = kind, machine, float(max_age_s), clock
        self._run: float | None = None
        self._since = 0.0

    def value(self) -> float | None:
        """The reference in seconds now (None: none yet)."""
        if self.kind == "machine":
            return self.machine.calibration_reference() if self.machine is not None else None
        return self._run

    def slowdown(self, seconds: float) -> float | None:
        """``seconds`` over the reference (None without one)."""
        ref = self.value()
        return seconds / ref if ref else None

    def host_slowdown(self, seconds: float) -> float | None:
        """``seconds`` over the fastest clean calibration this machine's cache has seen (None without one)."""
        ref = self.machine.calibration_reference() if self.machine is not None else None
        return seconds / ref if ref else None

    def offer(self, seconds: float) -> None:
        """A clean calibration: the machine cache keeps its fastest; ``run`` takes it when it has no reference or
        its reference is older than ``max_age_s``."""
        if self.machine is not None:
            self.machine.offer_calibration(seconds)
        now = self.clock()
        if self._run is None or now - self._since > self.max_age_s:
            self._run, self._since = float(seconds), now
