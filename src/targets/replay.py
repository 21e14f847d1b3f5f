"""``target=replay``: a measured space served as measurements (``model=measured``: a tunebench space file
measured by ``python -m tunebench space measure``, or a Kernel Tuner cache).

Each config is answered with its recorded latency (or its recorded failure), and the seconds the
original measurement took (compile + benchmark) are charged to the task's search clock
(``simulated_clock``), as Kernel Tuner's simulation mode and ``target=table`` do: a method that needs
fewer measurements, or cheaper ones, is faster on the replay clock as it would have been on the device.
A replayed trial costs microseconds, so many seeds of a method comparison take minutes.

A space file's task keeps its layer's kind and shape (``conv2d``, kernel, stride, ...: dgp groups layers
by them); a Kernel Tuner cache's task is of kind ``measured``. The task's space is the measured
configurations (a :class:`~tunebench.listed_space.ListedSpace` over the template's own knobs, so knob
features are those of the live space): no method can ask for one that was not measured. A space file
measured with another version of its template (the template's code differs from this checkout's:
:func:`check_template`) is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from tunebench.config.experiment import TargetSettings
from tunebench.config.knobs import NAME, POS_INT, knob
from tunebench.errors import UserError
from tunebench.targets.base import Target
from tunebench.task import Measurement, Outcome, Task


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

    def __init__(self, settings: ReplaySettings):
        super().__init__()
        self.settings, self.name, self.batch_size = settings, settings.name, settings.batch_size
        self._spaces: dict[str, object] = {}

    def load_tasks(self, model, own_schedules: bool = False) -> tuple[list[Task], None]:
        """One task: the measured space of ``model.path``."""
        from tunebench.datasets.space_file import read_measured

        measured = read_measured(model.path)
        if measured.meta:
            check_template(measured.meta["task"], model.path)
        kind, layer = _measured_layer(measured.meta)
        task = Task(id=measured.digest, name=measured.name, kind=kind, mod=None,
                    shape={**layer, "device": measured.device, "origin": measured.origin,
                           "configs": measured.space.size, "valid": measured.n_valid, **_measured_facts(measured.meta)},
                    flops=measured.flops, weight=1)
        task.space = measured.space
        self._spaces[task.id] = measured
        return [task], None

    def info_fields(self, task: Task | None = None) -> dict:
        """The measured spaces; of a task, the TVM target and the device its space was measured on where its
        file records them (a space file does, a Kernel Tuner cache does not): a method that reads the hardware
        (glimpse's Blueprint) sees the measured device."""
        spaces = {tid: f"{m.origin} ({m.device})" for tid, m in self._spaces.items()}
        out = {**super().info_fields(task), "details": {"spaces": spaces}}
        measured = self._spaces.get(task.id) if task is not None else None
        recorded = ((measured.meta or {}).get("target") or {}) if measured is not None else {}
        if recorded.get("tvm_target"):
            out.update(tvm_target=dict(recorded["tvm_target"]), device_name=measured.device)
        return out

    def measure(self, task: Task, configs, fidelity: str | None = None) -> list[Measurement]:
        rows = self._spaces[task.id].rows
        out = []
        for config in configs:
            row = rows[config.index]
            cost = row.compile_s + row.benchmark_s
            if row.latency_s is None:
                out.append(Measurement(task.id, config, Outcome.of_error(False, row.error), error=row.error,
                                       build_s=row.compile_s, run_s=row.benchmark_s, cost_s=cost))
            else:
                out.append(Measurement.timed(task.id, config, row.latency_s,
                                             latency_std_s=row.latency_std_s, build_s=row.compile_s,
                                             run_s=row.benchmark_s, cost_s=cost, noisy=row.noisy,
                                             gflops=task.flops / row.latency_s / 1e9))
        return out


def _measured_layer(meta: dict) -> tuple[str, dict]:
    """The task kind and layer shape a space file measured (``conv2d`` and its kernel, stride, ...), so
    that methods that group layers (dgp) see the layer; a Kernel Tuner cache is kind ``measured``."""
    if not meta:
        return "measured", {}
    return str(meta["task"].get("kind") or "measured"), dict(meta["task"].get("shape") or {})


def _measured_facts(meta: dict) -> dict:
    """What a space file says of where it was measured (template, commit, date); {} for a cache."""
    if not meta:
        return {}
    return {"template": meta["task"].get("template"), "commit": meta.get("commit"), "date": meta.get("date")}


def check_template(task_meta: dict, path: str) -> None:
    """Refuse a space measured with another version of its template: the sha256 of the template's code
    recorded in the space file (``template_code_sha256``: the source without its tunebench import lines,
    :mod:`tunebench.targets.tvm.template_files`) must equal this checkout's; a file measured before that
    digest existed records only the whole source file's (``template_sha256``): it must be this checkout's
    file's, or a known version of it with this checkout's code (``template_files.whole_file_matches``).

    Raises:
        UserError: the template file is gone or its code differs.
    """
    from tunebench.targets.tvm.template_files import template_code_digest, whole_file_matches

    rel = task_meta.get("template_file")
    code = task_meta.get("template_code_sha256")
    recorded, what = (code, "code sha256") if code else (task_meta.get("template_sha256"), "sha256")
    if not rel or not recorded:
        return
    if code:
        now = template_code_digest(rel)
        same = now == recorded
    else:
        same, now = whole_file_matches(rel, recorded)
    # a file that records only the whole template file's digest may need its code digest only
    migrate = "" if code else (f", or, if only the template's tunebench imports changed since, add its code "
                               f"digest: python -m tunebench space migrate {path}")
    if not same:
        state = "is not in this checkout" if now is None else f"differs from this checkout's ({now[:12]})"
        raise UserError(f"model.path={path}: measured with template {task_meta.get('template')} from {rel} "
                        f"({what} {recorded[:12]}), which {state}: its configs would not build the kernels that "
                        f"were timed; re-measure it (python -m tunebench space measure){migrate}")
