"""A whole target in one file: replays recorded latencies instead of measuring (docs/ARCHITECTURE.md,
"A new target, worked example"). Pure Python: no TVM, no tools. Registered with
``register_target(ToyReplayTarget)``, it is ``target=toy_replay`` for every model of layer specs."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass

from tunebench.config.experiment import TargetSettings
from tunebench.config.knobs import NAME, POS_INT, knob
from tunebench.datasets.layer_spec import check_layer_list
from tunebench.search_space import ChoiceKnob, Space, SplitKnob
from tunebench.targets.base import Target
from tunebench.task import Measurement, Outcome, Task


@dataclass
class ToyReplaySettings(TargetSettings):
    name: str = knob("toy_replay", NAME, "the target")
    kind: str = knob("toy_replay", NAME, "the target class")
    batch_size: int = knob(4, POS_INT, "configs per round of the tuning loop")
    latencies: dict[str, float] = knob({}, None, '"<task name>_<config index>" -> recorded seconds; any other '
                                                 "config is replayed as invalid (never measured)")


class ToyReplayTarget(Target):
    """Every task of a ``model=layers`` run gets a small tiling space; a measurement is the recorded
    latency of its config, and its seconds go to the search clock (``simulated_clock``)."""

    kind = "toy_replay"
    Settings = ToyReplaySettings
    workloads = ("tensor_program",)  # the models it takes: those of conv2d / dense layers
    simulated_clock = True

    def __init__(self, settings: ToyReplaySettings):
        super().__init__()
        self.settings, self.name, self.batch_size = settings, settings.name, settings.batch_size

    def load_tasks(self, model, own_schedules: bool = False) -> tuple[list[Task], None]:
        tasks = []
        for i, spec in enumerate(check_layer_list(model.layers)):
            out = spec.get("out_channels", spec.get("out_features"))
            tid = hashlib.sha1(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:12]
            task = Task(id=tid, name=f"layer{i}", kind="conv2d" if "kernel" in spec else "dense", mod=None,
                        shape=spec, flops=2 * out * spec.get("in_channels", spec.get("in_features")), weight=1)
            task.space = Space([SplitKnob("tile_oc", out, 2), ChoiceKnob("unroll", (0, 1))])
            tasks.append(task)
        return tasks, None

    def measure(self, task: Task, configs, fidelity: str | None = None) -> list[Measurement]:
        out = []
        for config in configs:
            seconds = self.settings.latencies.get(f"{task.name}_{config.index}", math.nan)
            if math.isnan(seconds):
                out.append(Measurement(task.id, config, Outcome.RUN_ERROR, error="not recorded"))
            else:
                out.append(Measurement.timed(task.id, config, seconds, cost_s=seconds,
                                       gflops=task.flops / seconds / 1e9))
        return out
