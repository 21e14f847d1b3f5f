"""The loop's static check: configs the target rejects before measuring take no trial, the method is told
them, and a method that proposes nothing else still ends; their counts in tasks.json and the run metrics.
Pure Python (no TVM); through the driver: tests/targets/test_toy_static_check.py."""

import logging

import numpy as np
import pytest

from tunebench.harness.loop import tune_task
from tunebench.harness.metrics import RunTotals, run_metrics, task_metrics, task_summary
from tunebench.methods import Budget, make_method
from tunebench.methods.random_search import RandomSearch
from tunebench.search_space import ChoiceKnob, Space, SplitKnob
from tunebench.targets.base import STATIC_INVALID, is_static_invalid
from tunebench.task import Task
from tunebench.testing.fakes import FakeTarget


def small_task():
    """A task with a 3-knob space of 546 configs, no workload."""
    t = Task(id="00000000abcd", name="t", kind="conv2d", mod=None, shape={}, flops=10)
    t.space = Space([SplitKnob("a", 4096, 3), ChoiceKnob("b", (0, 1, 2)), ChoiceKnob("c", (0, 1))])
    return t


def _thirds(config):
    """Two configs in three break a made-up limit."""
    return None if config.index % 3 == 0 else f"index {config.index} is not a multiple of 3"


class Told(RandomSearch):
    """Random search that keeps what it is asked and told."""

    def setup(self, *args, **kwargs):
        super().setup(*args, **kwargs)
        self.asked, self.told = [], []

    def ask(self, n):
        out = super().ask(n)
        self.asked += [c.index for c in out]
        return out

    def tell(self, measurements):
        super().tell(measurements)
        self.told += measurements


@pytest.mark.parametrize("method", ["random", "autotvm"])
def test_rejected_configs_are_never_measured_and_take_no_trial(method):
    task, target = small_task(), FakeTarget(static=_thirds)
    settings = {"name": method} if method == "random" else {"name": method, "plan_size": 8}
    res = tune_task(task, make_method(settings), target, Budget(24), np.random.default_rng(0))
    assert len(res.measurements) == 24 and res.stop_reason == "trials"
    assert all(m.valid for m in res.measurements) and all(i % 3 == 0 for i in target.measured)
    assert [m.trial for m in res.measurements] == list(range(24))
    assert res.static_rejected and all(is_static_invalid(m) and m.trial == -1 for m in res.static_rejected)
    assert res.static_rejected[0].error.startswith(STATIC_INVALID + "index ")
    assert res.n_static_invalid == len(res.static_rejected)
    assert res.static_invalid_fraction == pytest.approx(len(res.static_rejected) / (24 + len(res.static_rejected)))
    searched = [m.search_s for m in res.measurements]
    assert searched == sorted(searched)


def test_the_method_is_told_every_config_it_asked_in_order():
    task, target = small_task(), FakeTarget(static=_thirds)
    method = Told()
    res = tune_task(task, method, target, Budget(10), np.random.default_rng(1))
    assert [m.config.index for m in method.told] == method.asked
    assert {m.config.index for m in method.told if not m.valid} == {m.config.index for m in res.static_rejected}
    assert len(res.measurements) == 10 and len(method.asked) == 10 + len(res.static_rejected)


def test_a_method_that_proposes_only_rejected_configs_ends_within_its_budget(caplog):
    task, target = small_task(), FakeTarget(static=lambda c: "too many threads")
    with caplog.at_level(logging.WARNING, logger="tunebench.harness.loop"):
        res = tune_task(task, make_method({"name": "random"}), target, Budget(5, max_static_rejects=10),
                        np.random.default_rng(0))
    assert target.measured == [] and res.stop_reason == "trials"
    assert len(res.static_rejected) == 10 and len(res.measurements) == 5
    assert all(is_static_invalid(m) for m in res.measurements) and res.n_invalid == 5
    assert res.n_static_invalid == 15 and res.static_invalid_fraction == 1.0
    assert "10 proposed configs in a row failed the target's static check" in caplog.text


def test_the_bound_counts_rejections_in_a_row_only():
    """A config that passes resets the count: rejections spread between passing configs stay free."""
    task = small_task()
    target = FakeTarget(static=lambda c: None if c.index % 4 == 0 else "odd", batch_size=1)
    res = tune_task(task, make_method({"name": "random"}), target, Budget(20, max_static_rejects=30),
                    np.random.default_rng(2))
    assert len(res.measurements) == 20 and all(m.valid for m in res.measurements)
    assert len(res.static_rejected) > 30  # more than the bound in all, never that many in a row


def test_zero_bound_counts_every_rejected_config_as_a_trial():
    task, target = small_task(), FakeTarget(static=_thirds)
    res = tune_task(task, make_method({"name": "random"}), target, Budget(12, max_static_rejects=0),
                    np.random.default_rng(0))
    assert len(res.measurements) == 12 and not res.static_rejected
    assert res.n_static_invalid == res.n_invalid == sum(i % 3 != 0 for i in (m.config.index for m in res.measurements))
    assert all(i % 3 == 0 for i in target.measured)


def test_without_a_static_check_nothing_changes():
    task, target = small_task(), FakeTarget()
    res = tune_task(task, make_method({"name": "random"}), target, Budget(8), np.random.default_rng(0))
    assert len(target.measured) == 8 and res.n_static_invalid == 0 and res.static_invalid_fraction == 0.0


class _Protocol:
    timed = False

    def task_metrics(self, *args):
        return {}


def test_counts_in_the_task_entry_task_metrics_and_run_metrics():
    task, target = small_task(), FakeTarget(static=_thirds)
    res = tune_task(task, make_method({"name": "random"}), target, Budget(6), np.random.default_rng(0))
    n = len(res.static_rejected)
    metrics = task_metrics(task, res, None, [], False, _Protocol(), (None, None))
    assert metrics["static_invalid"] == n and metrics["static_invalid_fraction"] == pytest.approx(n / (n + 6))
    entry = task_summary(task, res, None, [], None, metrics)
    assert entry["static_invalid"] == n and entry["static_invalid_fraction"] == pytest.approx(n / (n + 6))
    totals = RunTotals()
    totals.add(task, res, None)
    totals.summaries.append(entry)
    out = run_metrics(totals, target, _Protocol(), 1.0, dict.fromkeys(target.stats, 0.0))
    assert out["n_static_invalid"] == n and out["static_invalid_fraction"] == pytest.approx(n / (n + 6))

