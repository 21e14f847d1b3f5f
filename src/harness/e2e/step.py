"""The run's last step on a TVM target: its tuned code against TVM's default build and PyTorch, timed by
the end-to-end protocol (:mod:`tunebench.harness.e2e.timing`).

- A model (:func:`model_latency`): the whole model with each task's best schedule; run metrics
  ``e2e_latency_ms``, ``speedup_vs_torch``, ... .
- Single operators (``model=ops``, :func:`operator_latencies`): every operator whose task has a best
  schedule, as a one-operator model (:func:`tunebench.datasets.operator_torch.operator_model`); metrics
  ``<task id>.e2e_latency_ms``, ``<task id>.speedup_vs_torch``, ... per operator, and the geometric mean of
  the operators' speedups as the run metrics ``speedup_vs_<baseline>`` (``ops_n_vs_<baseline>``: over
  how many operators).
"""

from __future__ import annotations

import logging

from tunebench.config.experiment import E2ESettings
from tunebench.harness.e2e.errors import E2EError
from tunebench.harness.e2e.timing import e2e_metrics, model_latencies, summary_line
from tunebench.protocol.stats import geomean
from tunebench.targets.tvm.scheduling import schedule

log = logging.getLogger(__name__)


def _timed(imported, tasks, best: dict, target, settings: E2ESettings, tracker, name: str,
           prefix: str = "") -> tuple[str | None, dict]:
    """Time one model; log its metrics (names prefixed by ``prefix``). ``(error text or None, metrics)``."""
    schedules = {t.id: schedule(t.mod, t.kind, target.kind, best[t.id].config, variant=t.template)
                 for t in tasks if t.id in best}
    log.info("end-to-end latency of %s: %d tuned tasks, %d rounds interleaved with the baselines",
             name, len(schedules), settings.rounds)
    try:
        lat = model_latencies(imported, tasks, schedules, target, settings, name=name)
    except E2EError as exc:
        log.error("%s", exc)
        tracker.set_tags({f"tunebench.{prefix}e2e_error": str(exc)[:5000]})
        return str(exc), {}
    metrics = e2e_metrics(lat)
    for key, value in metrics.items():
        tracker.metric(prefix + key, value)
    if lat["untuned_tasks"]:
        tracker.set_tags({f"tunebench.{prefix}e2e_untuned_tasks": ",".join(lat["untuned_tasks"])})
    for line in summary_line(lat, target):
        (log.warning if "NOISY" in line else log.info)("%s: %s", name, line)
    return None, metrics


def model_latency(settings: E2ESettings, name: str, imported, tasks, best: dict, target, tracker) -> str | None:
    """End-to-end latency of the model with each task's best schedule against TVM's default build and
    the PyTorch baselines, logged as run metrics. Returns the error text of a failed build or a wrong
    output (then no tuned latency is logged), else None."""
    return _timed(imported, tasks, best, target, settings, tracker, name)[0]


def operator_latencies(settings: E2ESettings, tasks, best: dict, target, tracker) -> str | None:
    """Every tuned operator of ``model=ops`` against PyTorch (module docstring). Returns the errors of the
    operators that failed (their other operators are still timed), else None."""
    from tunebench.datasets.operator_torch import operator_model
    from tunebench.datasets.operators import task_operator

    errors, speedups = [], {}
    for task in tasks:
        if task.id not in best:
            continue
        imported = operator_model(*task_operator(task.shape), target.kind)
        err, metrics = _timed(imported, [task], best, target, settings, tracker, task.name, prefix=f"{task.id}.")
        if err:
            errors.append(f"{task.name}: {err}")
        for key, value in metrics.items():
            if key.startswith("speedup_vs_") and not key.endswith(("_ci_low", "_ci_high")):
                speedups.setdefault(key, []).append(value)
    for key, values in speedups.items():
        tracker.metric(key, geomean(values))
        tracker.metric(key.replace("speedup_vs_", "ops_n_vs_"), len(values))
    return "; ".join(errors) or None
