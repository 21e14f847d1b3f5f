"""The run's last step on a TVM target: its tuned code against TVM's default build and PyTorch, timed by
the end-to-end protocol (:mod:`tunebench.targets.tvm.e2e.timing`).

- A model (:func:`model_latency`): the whole model with each task's best schedule; run metrics
  ``e2e_latency_ms``, ``speedup_vs_torch``, ... .
- Single operators (``model=ops``, :func:`operator_latencies`): every operator whose task has a best
  schedule, as a one-operator model (:func:`tunebench.targets.tvm.workloads.operator_torch.operator_model`); metrics
  ``<task id>.e2e_latency_ms``, ``<task id>.speedup_vs_torch``, ... per operator, and the geometric mean of
  the operators' speedups as the run metrics ``speedup_vs_<baseline>`` (``ops_n_vs_<baseline>``: over
  how many operators).

Before the model is built, each tuned task's kernel is timed against TVM's default kernel of the task
(:mod:`tunebench.targets.tvm.e2e.kernels`, ``e2e.default_kernels``); a task whose default kernel is faster
goes into the model with the default one. Per task: the metrics ``<task id>.kernel_tuned_ms``,
``.kernel_default_ms`` (with ``_min_ms``, ``_std_ms``, ``_cv``), ``.kernel_speedup_vs_default`` (with its
interval) and ``.kernel_default_taken``; the run tag ``tunebench.e2e_default_kernels`` names the tasks that
took the default kernel, the metric ``e2e_default_kernels`` counts them; and, given the run's ``tasks.json``
entries, each entry's ``e2e_kernel`` holds the choice.
"""

from __future__ import annotations

import logging

from tunebench.config.experiment import E2ESettings
from tunebench.errors import E2EError
from tunebench.protocol.noise import NOISE_E2E_TAG
from tunebench.protocol.stats import geomean
from tunebench.targets.tvm.e2e.kernels import choice_metrics, choose_kernels
from tunebench.targets.tvm.e2e.pooled import BASELINES
from tunebench.targets.tvm.e2e.timing import e2e_metrics, model_latencies, noise_signals, summary_line
from tunebench.targets.tvm.scheduling import schedule

log = logging.getLogger(__name__)
SPEEDUP_KEYS = {f"speedup_vs_{base}" for base in BASELINES}


def _kernel_choices(tasks, configs: dict, target, settings: E2ESettings, tracker, name: str,
                    entries: list[dict] | None, prefix: str) -> set[str]:
    """Each tuned task's kernel (``configs``: task id -> its best config) against its default kernel (module
    docstring), logged; returns the ids of the tasks that take the default kernel."""
    if not settings.default_kernels or not configs:
        return set()
    choices = choose_kernels(tasks, configs, target, settings, name)
    for tid, choice in choices.items():
        for key, value in choice_metrics(choice).items():
            tracker.metric(f"{tid}.{key}", value)
    by_id = {e.get("id"): e for e in entries or ()}
    for tid, choice in choices.items():
        if tid in by_id:
            by_id[tid]["e2e_kernel"] = choice
    taken = {tid for tid, c in choices.items() if c["kernel"] == "default"}
    tracker.metric(prefix + "e2e_default_kernels", len(taken))
    if taken:
        names = [t.name for t in tasks if t.id in taken]
        tracker.set_tags({f"tunebench.{prefix}e2e_default_kernels": ",".join(names)})
        log.info("%s: %d task(s) take TVM's default kernel, faster than their tuned one: %s", name, len(names),
                 ", ".join(names))
    return taken


def _timed(imported, tasks, best: dict, target, settings: E2ESettings, tracker, name: str,
           prefix: str = "", entries: list[dict] | None = None) -> tuple[str | None, dict]:
    """Time one model; log its metrics (names prefixed by ``prefix``). ``(error text or None, metrics)``."""
    schedules = {t.id: schedule(t.mod, t.kind, target.kind, best[t.id].config, variant=t.template)
                 for t in tasks if t.id in best}
    taken = _kernel_choices(tasks, {tid: best[tid].config for tid in schedules}, target, settings, tracker, name,
                            entries, prefix)
    log.info("end-to-end latency of %s: %d tuned tasks (%d with the default kernel), %d timing(s) of %d rounds "
             "interleaved with the baselines", name, len(schedules), len(taken), settings.timings, settings.rounds)
    try:
        lat = model_latencies(imported, tasks, {k: v for k, v in schedules.items() if k not in taken}, target,
                              settings, name=name, default_tasks=taken)
    except E2EError as exc:
        log.error("%s", exc)
        tracker.set_tags({f"tunebench.{prefix}e2e_error": str(exc)[:5000]})
        return str(exc), {}
    metrics = e2e_metrics(lat)
    for key, value in metrics.items():
        tracker.metric(prefix + key, value)
    if lat["untuned_tasks"]:
        tracker.set_tags({f"tunebench.{prefix}e2e_untuned_tasks": ",".join(lat["untuned_tasks"])})
    if noise_signals(lat):
        tracker.set_tags({NOISE_E2E_TAG.replace("tunebench.", f"tunebench.{prefix}"): noise_signals(lat)})
    for line in summary_line(lat, target):
        (log.warning if "NOISY" in line else log.info)("%s: %s", name, line)
    return None, metrics


def model_latency(settings: E2ESettings, name: str, imported, tasks, best: dict, target, tracker,
                  entries: list[dict] | None = None) -> str | None:
    """End-to-end latency of the model with each task's best schedule (or its default kernel, where that
    is faster) against TVM's default build and the PyTorch baselines, logged as run metrics; ``entries``:
    the run's ``tasks.json`` entries, given the kernel choices. Returns the error text of a failed build or
    a wrong output (then no tuned latency is logged), else None."""
    return _timed(imported, tasks, best, target, settings, tracker, name, entries=entries)[0]


def operator_latencies(settings: E2ESettings, tasks, best: dict, target, tracker,
                       entries: list[dict] | None = None) -> str | None:
    """Every tuned operator of ``model=ops`` against PyTorch (module docstring). Returns the errors of the
    operators that failed (their other operators are still timed), else None."""
    from tunebench.datasets.operators import task_operator
    from tunebench.targets.tvm.workloads.operator_torch import operator_model

    errors, speedups = [], {}
    for task in tasks:
        if task.id not in best:
            continue
        imported = operator_model(*task_operator(task.shape), target.kind)
        err, metrics = _timed(imported, [task], best, target, settings, tracker, task.name, prefix=f"{task.id}.",
                              entries=entries)
        if err:
            errors.append(f"{task.name}: {err}")
        for key, value in metrics.items():
            if key in SPEEDUP_KEYS:  # the speedups themselves, not their intervals, verdicts or timings
                speedups.setdefault(key, []).append(value)
    for key, values in speedups.items():
        tracker.metric(key, geomean(values))
        tracker.metric(key.replace("speedup_vs_", "ops_n_vs_"), len(values))
    return "; ".join(errors) or None
