"""``target=replay``: a measured space served as measurements (``model=measured``: a Kernel Tuner cache).

Each config is answered with its recorded latency (or its recorded failure), and the seconds the
original measurement took (compile + benchmark) are charged to the task's search clock
(``simulated_clock``), as Kernel Tuner's simulation mode and ``target=table`` do: a method that needs
fewer measurements, or cheaper ones, is faster on the replay clock as it would have been on the device.
A replayed trial costs microseconds, so many seeds of a method comparison take minutes.

The task's space is the measured configurations (an :class:`~tunebench.space.ExplicitSpace`): no
method can ask for one that was not measured.
"""

from __future__ import annotations

from dataclasses import dataclass

from tunebench.config.experiment import TargetSettings
from tunebench.config.knobs import NAME, POS_INT, knob
from tunebench.targets.base import Target
from tunebench.task import Measurement, Task


@dataclass
class ReplaySettings(TargetSettings):
    """A measured space replayed (``target=replay``)."""

    name: str = knob("replay", NAME, "the target")
    kind: str = knob("replay", NAME, "the target class")
    batch_size: int = knob(1, POS_INT, "configs per round of the tuning loop (replay has no batching cost)")


class ReplayTarget(Target):
    """Serves a measured space (module docstring); the recorded seconds go to the search clock."""

    kind = "replay"
    Settings = ReplaySettings
    workloads = ("measured_space",)
    simulated_clock = True

    def __init__(self, settings: ReplaySettings, measure=None):
        super().__init__()
        self.settings, self.name, self.batch_size = settings, settings.name, settings.batch_size
        self._spaces: dict[str, object] = {}

    def load_tasks(self, model, own_schedules: bool = False) -> tuple[list[Task], None]:
        """One task: the measured space of ``model.path``."""
        from tunebench.datasets.kt_cache import read_cache, resolve

        measured = read_cache(resolve(model.path))
        task = Task(id=measured.digest, name=measured.name, kind="measured", mod=None,
                    shape={"device": measured.device, "origin": measured.origin, "configs": measured.space.size,
                           "valid": measured.n_valid}, flops=measured.flops, weight=1)
        task.space = measured.space
        self._spaces[task.id] = measured
        return [task], None

    def info_fields(self) -> dict:
        spaces = {tid: f"{m.origin} ({m.device})" for tid, m in self._spaces.items()}
        return {**super().info_fields(), "details": {"spaces": spaces}}

    def measure(self, task: Task, configs, fidelity: str | None = None) -> list[Measurement]:
        rows = self._spaces[task.id].rows
        out = []
        for config in configs:
            row = rows[config.index]
            cost = row.compile_s + row.benchmark_s
            if row.latency_s is None:
                out.append(Measurement(task.id, config, valid=False, error=row.error, build_s=row.compile_s,
                                       run_s=row.benchmark_s, cost_s=cost))
            else:
                out.append(Measurement(task.id, config, valid=True, latency_s=row.latency_s,
                                       latency_std_s=row.latency_std_s, build_s=row.compile_s,
                                       run_s=row.benchmark_s, cost_s=cost,
                                       gflops=task.flops / row.latency_s / 1e9))
        return out
