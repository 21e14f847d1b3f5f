"""Pieces shared by the benchmarks that run methods on ``target=replay``: one seed's best-so-far curve
(and the replay clock at each trial), the summary at checkpoints with a bootstrap interval over seeds,
and [Willemsen-FGCS24]'s methodology score over evaluations."""

from __future__ import annotations

import numpy as np


def _replay_task(path: str):
    from tunebench.datasets.models import MeasuredModel
    from tunebench.targets.replay import ReplaySettings, ReplayTarget

    target = ReplayTarget(ReplaySettings())
    return target, target.load_tasks(MeasuredModel(path=path))[0][0]


def replay_run(path: str, method: str, budget: int, seed: int, settings: dict | None = None, history=None):
    """One seed of a tunebench method on ``target=replay`` of the measured space in ``path``: the task and
    the loop's :class:`~tunebench.harness.loop.TaskResult` (``history``: records of other tasks, for the
    transfer methods)."""
    from tunebench.config.experiment import Budget
    from tunebench.harness.loop import tune_task
    from tunebench.harness.tuning import task_rng
    from tunebench.methods import make_method

    target, task = _replay_task(path)
    return task, tune_task(task, make_method(method, **(settings or {})), target, Budget(budget),
                           task_rng(seed, task), history=history)


def prepare(path: str, method: str, history) -> None:
    """Set ``method`` up once on the space in ``path`` with ``history``, outside every run's clock, so
    that what it keeps in the history's model cache (dgp: the DGP pre-trained on the source records) is
    ready for the runs that share that history (set up as seed 0's run would be)."""
    from tunebench.config.experiment import Budget
    from tunebench.harness.tuning import task_rng
    from tunebench.methods import make_method

    target, task = _replay_task(path)
    make_method(method).setup(task, target_info=target.task_info(task), history=history, budget=Budget(1),
                              rng=task_rng(0, task))


def best_so_far(result) -> tuple[list[float], list[float]]:
    """A run's best latency so far (ms) per trial and the search clock (s) at each trial."""
    ms = result.measurements
    return list(np.minimum.accumulate([m.latency_s * 1e3 if m.valid else np.inf for m in ms])), [m.search_s for m in ms]


def tunebench_curve(path: str, method: str, budget: int, seed: int, settings: dict | None = None) -> list[float]:
    """Best latency so far (ms) per trial of a tunebench method on ``target=replay`` of ``path``."""
    return best_so_far(replay_run(path, method, budget, seed, settings)[1])[0]


def summarize(curves: list[list[float]], optimum: float, rng: np.random.Generator, checkpoints) -> dict:
    """Per checkpoint k: mean best after k evaluations, 95 % bootstrap interval over seeds, fraction of
    the optimum; seeds whose run ended before k count with their last best."""
    out = {}
    for k in checkpoints:
        vals = np.array([c[min(k, len(c)) - 1] for c in curves if c])
        if not len(vals) or k > max(len(c) for c in curves):
            continue
        boot = rng.choice(vals, size=(2000, len(vals))).mean(axis=1)
        out[k] = {"mean_ms": float(vals.mean()), "ci_ms": [float(np.percentile(boot, 2.5)),
                                                         float(np.percentile(boot, 97.5))],
                  "fraction_of_optimum": float(optimum / vals.mean())}
    return out


def methodology_score(curves: list[list[float]], space, budget: int) -> dict:
    """[Willemsen-FGCS24]'s score over evaluations 1..budget (:mod:`tunebench.protocol.methodology`): 0 = the
    calculated random baseline, 1 = the optimum; mean over seeds with a 95 % bootstrap interval."""
    from tunebench.protocol.methodology import baseline_over_fevals, curve_on_fevals, score

    base = baseline_over_fevals(space, np.arange(1, budget + 1))
    s = score([[curve_on_fevals(c, budget)] for c in curves if c], [base], [space])
    return {"mean": s.mean, "ci": [s.ci_low, s.ci_high], "per_seed": list(s.per_seed)}
