"""Noise detection: thresholds, the verdict on a timing, and what else the machine was doing.

A timing is *noisy* when any of these exceeds its threshold (:class:`NoisePolicy`):

- ``rcv``: the robust coefficient of variation of its repeats, 1.4826 x MAD / median (equal to
  std / mean for normally distributed repeats; one repeat interrupted by the operating system does
  not move it, as it does not move the median that is reported; the plain CV is recorded too);
- ``foreign_cpu``: CPU time taken by processes other than this run's own (harness and workers)
  while it was timed, in cores (:class:`CpuMonitor`, from ``/proc/stat`` and ``/proc/<pid>/stat``;
  CPU time the hypervisor stole counts as foreign);
- ``slowdown``: the calibration kernel's time divided by the machine's quiet reference;
- ``drift``: how much the calibration kernel's time changed between before and after a task.

The harness re-measures a noisy timing (up to ``remeasure`` times) and marks it ``noisy`` when it
stays noisy. Thresholds are ``measure.noise.*`` in the experiment config.

An interleaved ratio of two timings (a speedup) is judged on :data:`RATIO_SIGNALS` only
(:func:`judge_ratio`): a machine that is uniformly slower slows both sides alike, so the slowdown
marks the absolute times, not the ratio. Every mark names the signals that fired (:func:`fired`).
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from tunebench.config.experiment import NoiseSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NoisePolicy:
    """Thresholds above which a timing is noisy (see the module docstring).

    Defaults from ``benchmarks/noise_marks.py`` (docs/MEASUREMENT.md §Noise: thresholds from data).

    Attributes:
        cv_max: largest robust coefficient of variation of a kernel timing's repeats.
        rounds_cv_max: the same for a whole-model row's samples across interleaved rounds.
        foreign_cpu_max: largest CPU use of other processes while timing, in cores.
        slowdown_max: largest calibration slowdown against the machine's quiet reference.
        drift_max: largest relative change of the calibration time from before to after a task.
        remeasure: how many times a noisy timing is measured again before it is marked.
    """

    cv_max: float = 0.05
    rounds_cv_max: float = 0.4
    foreign_cpu_max: float = 0.3
    slowdown_max: float = 1.5
    drift_max: float = 0.5
    remeasure: int = 1

    @classmethod
    def from_settings(cls, settings: NoiseSettings | None = None) -> NoisePolicy:
        """From ``measure.noise`` (typed and checked where it is declared)."""
        s = settings if settings is not None else NoiseSettings()
        return cls(cv_max=float(s.cv_max), rounds_cv_max=float(s.rounds_cv_max),
                   foreign_cpu_max=float(s.foreign_cpu_max), slowdown_max=float(s.slowdown_max),
                   drift_max=float(s.drift_max), remeasure=int(s.remeasure))

    def for_rounds(self) -> NoisePolicy:
        """The policy of a whole-model row: ``rounds_cv_max`` as its limit of the robust CV."""
        return replace(self, cv_max=self.rounds_cv_max)


@dataclass
class Verdict:
    """Whether a timing is noisy, why, and the signals it was judged on (None = not measured)."""

    noisy: bool = False
    reasons: list[str] = field(default_factory=list)
    signals: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"noisy": self.noisy, "reasons": list(self.reasons),
                **{k: (round(v, 6) if isinstance(v, float) else v) for k, v in self.signals.items()}}


def judge(policy: NoisePolicy, rcv: float | None = None, foreign_cpu: float | None = None,
          slowdown: float | None = None, drift: float | None = None, cv: float | None = None) -> Verdict:
    """The verdict on one timing from whichever signals are known (``cv`` is recorded, not judged)."""
    limits = {"rcv": policy.cv_max, "foreign_cpu": policy.foreign_cpu_max, "slowdown": policy.slowdown_max,
              "drift": policy.drift_max}
    signals = {"rcv": rcv, "foreign_cpu": foreign_cpu, "slowdown": slowdown, "drift": drift}
    verdict = Verdict(signals={k: v for k, v in signals.items() if v is not None})
    for name, value in list(verdict.signals.items()):
        measured = abs(value) if name == "drift" else value  # drift both ways; faster is no slowdown
        if not math.isfinite(measured) or measured > limits[name]:
            verdict.noisy = True
            verdict.reasons.append(f"{name} {value:.3g} > {limits[name]:g}")
    if cv is not None:
        verdict.signals["cv"] = cv
    return verdict


#: run tags naming the signals that fired: on a task's best or calibration (``<signal>, ...``), and on the
#: end-to-end rows and speedups (``<source>: <signal>, ...; ...``); the leaderboard says why with them
NOISE_TASKS_TAG = "tunebench.noise_tasks"
NOISE_E2E_TAG = "tunebench.noise_e2e"

#: the signals that can move an interleaved ratio of two timings (not ``slowdown``: see the module docstring)
RATIO_SIGNALS = ("rcv", "foreign_cpu", "drift")


def judge_ratio(policy: NoisePolicy, sides: Iterable[Verdict]) -> Verdict:
    """The verdict on an interleaved ratio of the timings judged ``sides``: each of :data:`RATIO_SIGNALS` at its
    largest magnitude over the sides."""
    sides = list(sides)
    values = {}
    for name in RATIO_SIGNALS:
        known = [v.signals[name] for v in sides if v.signals.get(name) is not None]
        if known:
            values[name] = max(known, key=abs)
    return judge(policy, **values)


def signals_text(by_source: Iterable[tuple[str, Iterable[str]]]) -> str:
    """``<source>: <signal>, ...; ...`` (the form of :data:`NOISE_E2E_TAG` and the leaderboard's ``noise_why``)."""
    return "; ".join(f"{source}: {', '.join(signals)}" for source, signals in by_source)


def parse_signals(text: str | None) -> dict[str, list[str]]:
    """Source -> its signals, from a :func:`signals_text` (None or "": none)."""
    out: dict[str, dict[str, None]] = {}
    for part in (text or "").split("; "):
        source, _, signals = part.partition(": ")
        if source:
            out.setdefault(source, {}).update(dict.fromkeys(x for x in signals.split(", ") if x))
    return {source: list(found) for source, found in out.items()}


def fired(reasons: Iterable[str]) -> list[str]:
    """The names of the signals behind ``reasons`` (a verdict's, e.g. ``"rcv 0.2 > 0.05"`` -> ``rcv``), in order,
    each once."""
    return list(dict.fromkeys(r.split(" ", 1)[0] for r in reasons if r))


# ---- what the rest of the machine does ------------------------------------------------------------

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_BUSY_FIELDS = (0, 1, 2, 5, 6, 7)  # user nice system irq softirq steal (of "cpu ..." in /proc/stat)


def until_clean(attempt: Callable[[], dict], policy: NoisePolicy, n_noisy: Callable[[dict], int]) -> list[dict]:
    """Time an attempt (``attempt()``) again while it has noisy timings (``n_noisy`` of it > 0), at most
    ``1 + policy.remeasure`` attempts in all; returns every attempt, in order (the caller keeps the least
    noisy one)."""
    attempts: list[dict] = []
    for _ in range(1 + policy.remeasure):
        attempts.append(attempt())
        if not n_noisy(attempts[-1]):
            break
    return attempts


def _machine_busy_ticks() -> int | None:
    try:
        with open("/proc/stat") as fh:
            fields = fh.readline().split()[1:]
    except OSError:
        return None
    return sum(int(fields[i]) for i in _BUSY_FIELDS if i < len(fields))


def _process_ticks(pid: int) -> int:
    """utime + stime of one process (all its threads); 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            rest = fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0
    return int(rest[11]) + int(rest[12])  # fields 14 and 15 of proc(5), counted after the name


def loadavg() -> float | None:
    """The 1-minute load average, or None where the platform has none."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


class CpuMonitor:
    """CPU time other processes use while we time something, in cores.

    Args:
        pids: returns the process ids that belong to this run (the harness process is always
            counted as ours; pass the worker processes).

    ``start()`` returns a mark; ``foreign(mark)`` the average number of cores busy with *other*
    processes (and stolen by the hypervisor) since then, or None where ``/proc`` is missing or the
    window is shorter than ``min_window_s`` (the kernel counts CPU time in ticks of 10 ms).
    """

    def __init__(self, pids: Callable[[], Iterable[int]] = lambda: (), min_window_s: float = 0.2):
        self.pids = pids
        self.min_window_s = min_window_s

    def _ours(self, pids: list[int]) -> int:
        return sum(_process_ticks(p) for p in pids)

    def start(self) -> tuple | None:
        busy = _machine_busy_ticks()
        if busy is None:
            return None
        pids = sorted({os.getpid(), *self.pids()})
        return busy, self._ours(pids), time.perf_counter(), pids

    def foreign(self, mark: tuple | None) -> float | None:
        if mark is None:
            return None
        busy0, ours0, t0, pids = mark
        wall = time.perf_counter() - t0
        busy = _machine_busy_ticks()
        if busy is None or wall < self.min_window_s:
            return None
        # processes started during the window (a restarted worker) count as ours from now on
        ours = self._ours(sorted(set(pids) | {os.getpid(), *self.pids()}))
        return max(0.0, (busy - busy0 - (ours - ours0)) / _TICK / wall)

    def sample(self, seconds: float = 1.0) -> float | None:
        """Foreign CPU over the next ``seconds`` (sleeps)."""
        mark = self.start()
        time.sleep(seconds)
        return self.foreign(mark)


def wait_for_quiet(monitor: CpuMonitor, max_foreign_cpu: float, max_wait_s: float,
                   what: str = "timing", report_every_s: float = 30.0) -> tuple[float, float | None]:
    """Wait until other processes use at most ``max_foreign_cpu`` cores (1 s samples), at most
    ``max_wait_s`` seconds. Prints a line when it starts waiting and every ``report_every_s``.

    Returns ``(seconds waited, last foreign CPU sample)``.
    """
    t0 = time.perf_counter()
    last_report = -math.inf
    foreign = monitor.sample(1.0)
    while foreign is not None and foreign > max_foreign_cpu:
        waited = time.perf_counter() - t0
        if waited >= max_wait_s:
            log.warning("machine still busy after %.0f s (other processes use %.2f cores > %g); %s goes on "
                        "and its values will be checked for noise", waited, foreign, max_foreign_cpu, what)
            break
        if waited - last_report >= report_every_s:
            log.warning("waiting for a quiet machine before %s: other processes use %.2f cores (> %g); "
                        "waited %.0f s of at most %.0f s", what, foreign, max_foreign_cpu, waited, max_wait_s)
            last_report = waited
        foreign = monitor.sample(1.0)
    return time.perf_counter() - t0, foreign


def _run_time_s(pid: int) -> float:
    """CPU seconds all threads of ``pid`` have run (``/proc/<pid>/task/*/schedstat``, ns); 0 when gone."""
    total = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0.0
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as fh:
                total += int(fh.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total / 1e9


def settle(pids: Iterable[int], idle_cores: float = 0.05, window_s: float = 0.02, max_s: float = 2.0) -> float:
    """Wait until the processes ``pids`` use at most ``idle_cores`` cores over ``window_s`` (at most
    ``max_s`` seconds); returns the seconds waited.

    Thread pools keep spinning after their work is done (TVM's for about 0.1 s, OpenMP's for a few
    ms): a block timed in another process meanwhile would compete with them for the cores. Where
    ``/proc`` is missing this sleeps ``max_s / 10`` instead.
    """
    pids = [p for p in pids if p]
    t0 = time.perf_counter()
    if not os.path.isdir("/proc/self/task"):
        time.sleep(max_s / 10)
        return time.perf_counter() - t0
    last = sum(_run_time_s(p) for p in pids)
    while time.perf_counter() - t0 < max_s:
        time.sleep(window_s)
        now = sum(_run_time_s(p) for p in pids)
        if now - last <= idle_cores * window_s:
            break
        last = now
    return time.perf_counter() - t0
