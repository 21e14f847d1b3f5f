"""The ask/tell loop's budget rules, with a pure-Python target (no TVM needed)."""
import numpy as np
import pytest
from mlflow.tracking import MlflowClient

from helpers import small_task
from tunebench.harness import experiment, tuning
from tunebench.harness.loop import tune_task
from tunebench.methods import Budget, make_method
from tunebench.task import Measurement
from tunebench.testing.fakes import FakeTarget


def test_trials_budget_and_no_repeats():
    task, target = small_task(), FakeTarget()
    res = tune_task(task, make_method({"name": "random"}), target, Budget(10), np.random.default_rng(0))
    assert len(res.measurements) == 10 and res.stop_reason == "trials"
    assert len(set(target.measured)) == 10 and [m.trial for m in res.measurements] == list(range(10))
    assert all(a.search_s <= b.search_s for a, b in zip(res.measurements, res.measurements[1:]))


def test_space_exhausted_before_budget():
    task, target = small_task(), FakeTarget()  # 6 * 3 = 18 configs
    res = tune_task(task, make_method({"name": "random"}), target, Budget(100), np.random.default_rng(0))
    assert len(res.measurements) == 18 and res.stop_reason == "exhausted"
    assert sorted(target.measured) == list(range(18))


def test_seconds_budget():
    task, target = small_task(1024), FakeTarget(sleep_s=0.05)
    res = tune_task(task, make_method({"name": "random"}), target, Budget(10_000, seconds_per_task=0.5),
                    np.random.default_rng(0))
    assert res.stop_reason == "seconds" and 0.5 <= res.search_s < 1.5
    assert 4 <= len(res.measurements) <= 16


def test_early_stopping_after_k_trials_without_improvement():
    task = small_task(1024)
    target = FakeTarget(latency=lambda c: 1.0)  # nothing ever improves on the first trial
    res = tune_task(task, make_method({"name": "random"}), target, Budget(1000, early_stopping=8),
                    np.random.default_rng(0))
    assert res.stop_reason == "early_stopping" and len(res.measurements) == 9  # trial 0, then 8 without gain


def test_prior_measurements_count_and_are_not_measured_again():
    task, target = small_task(), FakeTarget()
    first = tune_task(task, make_method({"name": "random"}), target, Budget(5), np.random.default_rng(0))
    target.measured = []
    res = tune_task(task, make_method({"name": "random"}), target, Budget(12), np.random.default_rng(1),
                    prior=first.measurements)
    assert len(res.measurements) == 12 and len(target.measured) == 7
    assert not set(target.measured) & {m.config.index for m in first.measurements}
    assert res.measurements[:5] == first.measurements


def test_unknown_method_name():
    from tunebench.errors import UserError

    with pytest.raises(UserError, match="method='sa' is unknown; valid: .*random"):
        make_method({"name": "sa"})


def test_a_failure_after_the_run_began_marks_it_failed(tiny_cfg, monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("injected failure in the middle of a run")

    monkeypatch.setattr(tuning, "tune_task", boom)
    with pytest.raises(RuntimeError, match="injected"):
        experiment.run_experiment(tiny_cfg)
    client = MlflowClient(f"sqlite:///{tiny_cfg.workdir}/mlflow.db")
    runs = client.search_runs([client.get_experiment_by_name("test").experiment_id])
    assert len(runs) == 1 and runs[0].info.status == "FAILED"


def test_unknown_hyperparameter_is_a_one_line_error():
    from tunebench.errors import UserError

    with pytest.raises(UserError, match="method.plan_sz is unknown; valid: .*plan_size"):
        make_method({"name": "autotvm", "plan_sz": 3})


def test_fidelity_aware_ask_groups_batches():
    from tunebench.methods.base import Method

    class Mixed(Method):
        def ask(self, n):
            idx = self.space.sample(self.rng, n, exclude=self.visited)
            self.visited.update(idx)
            return [(self.space.get(i), "lo") if k % 2 else self.space.get(i) for k, i in enumerate(idx)]

    # two objectives, fidelities lo < hi; the fake records which fidelity each config was measured at
    task = small_task()
    target = FakeTarget(name="fake2", objectives=("a", "b"), fidelities=("lo", "hi"),
                        values=lambda c, fid: {"a": float(c.index), "b": float(-c.index)})
    res = tune_task(task, Mixed(), target, Budget(8), np.random.default_rng(0))
    assert len(res.measurements) == 8 and [m.trial for m in res.measurements] == list(range(8))
    fids = [m.fidelity for m in res.measurements]
    assert fids == ["hi", "lo"] * 4  # results come back in the order asked
    assert {f for f, _ in target.calls} == {"hi", "lo"} and len(target.calls) == 4  # one call per group
    rec = res.measurements[1].to_record()
    back = Measurement.from_record(rec, task.space)
    assert back.objectives == {"a": float(back.config.index), "b": -float(back.config.index)}
    assert back.fidelity == "lo"
