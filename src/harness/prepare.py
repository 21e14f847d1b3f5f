"""Everything a run needs, built and checked before the run exists: the target (a missing GPU or tool
fails here), method/target compatibility, the model's tasks, the budget against the method's first phase
on each task's space, the tracking store, the history of a transfer method. A failure closes the target
and removes a tracking store this step created."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from tunebench.errors import UserError
from tunebench.harness.tracking.tracker import Tracker, discard_store, new_store_path
from tunebench.history import History
from tunebench.methods import check_compatible, make_method, method_class
from tunebench.targets import make_target

log = logging.getLogger(__name__)


@dataclass
class Prepared:
    target: object
    tasks: list
    imported: object  # the imported model the end-to-end step runs (None without one)
    tracker: Tracker
    history: History


def open_tracker(cfg) -> Tracker:
    """The MLflow store of ``cfg.tracking`` (the embedded one in the work dir by default)."""
    t = cfg.tracking
    return Tracker(t.uri, cfg.experiment, cfg.workdir, t.artifact_root, outage_wait_s=t.outage_wait_s)


def check_tasks(cfg, tasks, target) -> None:
    """``budget.trials_per_task`` holds the method's first phase on every task (``Method.check_budget``), and
    the method can tune every task on this target (``Method.check_task``)."""
    method = make_method(cfg.method)
    for task in tasks:
        info = target.task_info(task)
        problem = method.check_budget(task, info, cfg.budget)
        if problem:
            raise UserError(f"budget.trials_per_task={cfg.budget.trials_per_task}: {problem}")
        problem = method.check_task(task, info)
        if problem:
            raise UserError(problem)


def prepare(cfg, tracker: Tracker | None) -> Prepared:
    """Build the target, load the tasks, open the store (unless ``tracker`` is given), load the
    history (see the module docstring)."""
    method = method_class(cfg.method.name)
    target = make_target(cfg.target, cfg.measure)
    created_store = None
    try:
        check_compatible(method, target.info)
        tasks, imported = target.load_tasks(cfg.model, own_schedules=method.needs.compiles)
        check_tasks(cfg, tasks, target)
        if tracker is None:
            created_store = new_store_path(cfg.tracking.uri, cfg.workdir)
            tracker = open_tracker(cfg)
        # records of earlier runs for transfer methods (method.history=...): read before the run starts
        history = History.load(getattr(cfg.method, "history", None), tracker.client, cfg.workdir)
        method.preload(cfg.method, history)  # a method's prepared models (dgp's pre-trained DGP): no task's clock
    except BaseException:
        target.close()
        discard_store(created_store)
        raise
    if len(history):
        log.info("history: %d records of %d tasks from %s", len(history), len(history.tasks),
                 ", ".join(history.sources))
    return Prepared(target, tasks, imported, tracker, history)

