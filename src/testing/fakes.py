"""The one stand-in target of the tests: pure Python (no TVM, no tools), configurable, implements the
:class:`~tunebench.targets.base.Target` contract. A test that needs special behaviour subclasses it
and overrides :meth:`FakeTarget.evaluate` (objective values of a batch) or
:meth:`FakeTarget.measurement` (one config's :class:`Measurement`)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from tunebench.targets.base import Target
from tunebench.task import Measurement, Outcome, Task


def _index_latency(config) -> float:
    return 1.0 + config.index


class FakeTarget(Target):
    """Measures configs by formula.

    Args:
        latency: single-objective mode: a config's latency in seconds, ``latency(config)``; a
            non-finite value makes the measurement invalid (error ``"invalid"``).
        objectives, fidelities: the target's objectives and fidelities (cheapest first).
        values: several objectives: ``values(config, fidelity) -> {objective: value}`` (used
            instead of ``latency``).
        fail: failure injection: ``fail(config, fidelity)`` returns an error text (the measurement
            is invalid with it) or None.
        static: the target's static check (:class:`~tunebench.targets.capabilities.StaticChecks`):
            ``static(config)`` returns why the config cannot run, known before measuring it, or None.
        batch_size: configs per ``measure`` call of the loop.
        sleep_s: seconds slept per config measured.
        lock_wait_s: seconds added to ``stats["lock_wait_s"]`` per ``measure`` call (as if another
            process held the device lock; nothing sleeps).
        simulated_clock: as :class:`~tunebench.targets.base.Target`'s fact.
        reference_point, scale, capacity, tvm_target, details, lends: as in :class:`~tunebench.targets.base.TargetInfo` (a
            ``tvm_target`` lets methods that make their own schedules run; nothing is compiled:
            ``latency(config)`` "measures" a schedule trace too).

    It checks outputs (always passing) and screens configs (``static``); a test that needs a target that
    times kernels subclasses it with :class:`~tunebench.targets.capabilities.TimesKernels`' methods.

    Counts: ``calls`` (``(fidelity, [config indices])`` per ``measure`` call), ``measured`` (every
    config index measured, in order), ``checked`` (config indices whose output was checked),
    ``n_started`` / ``n_closed``.
    """

    kind = "fake"

    def __init__(self, latency: Callable | None = None, *, name: str = "fake", objectives=("latency_s",),
                 fidelities=("hw",), values: Callable | None = None, fail: Callable | None = None,
                 static: Callable | None = None, batch_size: int = 4, sleep_s: float = 0.0, lock_wait_s: float = 0.0,
                 simulated_clock: bool = False, reference_point=None, scale=None, capacity=None,
                 tvm_target: dict | None = None, details: dict | None = None, lends: dict | None = None):
        super().__init__()
        self.name, self.objectives, self.fidelities = name, tuple(objectives), tuple(fidelities)
        self.latency, self.values, self.fail, self.static = latency or _index_latency, values, fail, static
        self.batch_size, self.sleep_s, self.lock_wait_s = batch_size, sleep_s, lock_wait_s
        self.simulated_clock = simulated_clock
        self.reference_point, self.scale, self.capacity = reference_point, scale, capacity
        self.tvm_target = tvm_target
        self.details = dict(details or {})
        self.lends = dict(lends or {})
        self.calls: list[tuple[str, list[int]]] = []
        self.measured: list[int] = []
        self.checked: list[int] = []
        self.n_started = self.n_closed = 0

    def info_fields(self, task: Task | None = None) -> dict:
        return {**super().info_fields(task), "reference_point": self.reference_point, "scale": self.scale,
                "capacity": self.capacity, "tvm_target": self.tvm_target, "details": self.details}

    def start(self) -> None:
        self.n_started += 1

    def close(self) -> None:
        self.n_closed += 1

    def measure(self, task: Task, configs, fidelity: str | None = None) -> list[Measurement]:
        fid = fidelity or self.fidelities[-1]
        if fid not in self.fidelities:
            raise ValueError(f"fidelity={fid!r} is unknown for {self.name}; valid: {', '.join(self.fidelities)}")
        time.sleep(self.sleep_s * len(configs))
        self._stats["lock_wait_s"] += self.lock_wait_s
        indices = [c.index for c in configs]
        self.calls.append((fid, indices))
        self.measured += indices
        return [self.measurement(task, c, fid, v) for c, v in zip(configs, self.evaluate(configs, fid))]

    def static_check(self, task: Task, config) -> str | None:
        return self.static(config) if self.static is not None else None

    def evaluate(self, configs: list, fidelity: str) -> list[dict]:
        """Objective values of each config at ``fidelity`` (override for a vectorized formula)."""
        if self.values is not None:
            return [dict(self.values(c, fidelity)) for c in configs]
        return [{"latency_s": float(self.latency(c))} for c in configs]

    def measurement(self, task: Task, config, fidelity: str, values: dict) -> Measurement:
        """One config's measurement from its objective values (invalid: injected failure or a
        non-finite value)."""
        error = self.fail(config, fidelity) if self.fail is not None else None
        if error is None and not all(math.isfinite(v) for v in values.values()):
            error = "invalid"
        if error:
            return Measurement(task.id, config, Outcome.of_error(False, error), error=error, fidelity=fidelity)
        return Measurement(task.id, config, Outcome.OK, fidelity=fidelity, objectives=values)

    def check(self, task: Task, config) -> tuple[bool | None, str]:
        self.checked.append(config.index)
        return True, "fake check"
