"""The method conformance suite (a pytest module): every method registered in
``tunebench.methods.METHODS`` runs through the real loop
(``tune_task``) on a fake target it declares it can run on (``conformance_cases``: derived from
``Method.needs``) and must keep the same rules (as Optuna's samplers_tests do for every sampler):

1. it stays within the budget (``ask(n)`` gives at most ``n``; the loop stops for a known reason);
2. it is deterministic per seed (the same configs in the same order);
3. it never measures a config twice at the same fidelity, unless it declares ``remeasures``;
4. it survives invalid measurements and a space smaller than the budget, or empty;
5. ``report()`` is called exactly once per task, by the loop;
6. it resumes from records: a fresh instance given the first half as ``prior`` measures none of it
   again and stays within the budget;
7. it survives configs the target rejects before measuring them (``StaticChecks.static_check``): told them, it
   goes on and ends within the budget, proposing none of them again.

``tests/methods/test_conformance.py`` runs it on every registered method;
``python -m tunebench check-method package.module:Class`` on one method from outside tunebench (named by
:data:`METHOD_ENV`). A method added to ``METHODS`` is picked up without editing this file; ``FAST`` only shrinks settings
to keep the runs short (a method missing from it runs with its settings' defaults). Methods that make
their own TVM schedules (``needs.compiles``) import MetaSchedule (20-40 s once per process): their
rules are marked slow; the pure-Python ones never import TVM (checked first).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import signal
import sys
from collections import Counter
from dataclasses import dataclass, field

import pytest
import torch

from tunebench.harness.commands.check_method import METHOD_ENV
from tunebench.harness.loop import TaskResult, tune_task
from tunebench.harness.tuning import task_rng
from tunebench.methods import METHODS, Budget, Method, TargetNeeds, make_method, plugin_method
from tunebench.record_file import record_line
from tunebench.task import Measurement
from tunebench.testing.conformance_cases import (
    fitting_needs,
    sibling_history,
    static_rejects,
    target_for,
    task_for,
)
from tunebench.testing.fakes import FakeTarget

torch.set_num_threads(1)

BUDGET = Budget(24)
SEED = 7
EXHAUST_TRIALS = 48  # budget on a space of schedules that has fewer programs (the small GEMM: 20)
RUN_LIMIT_S = 60  # one tune_task of the suite takes about a second
STOP_REASONS = ("trials", "seconds", "early_stopping", "exhausted")

# Hyperparameters that only make the runs short (smaller plans, populations, models, fewer SA steps).
FAST = {
    "autotvm": {"plan_size": 8, "sa_n_iter": 40, "sa_parallel_size": 16, "num_boost_round": 50},
    "chameleon": {"plan_size": 8, "sa_n_iter": 40, "sa_parallel_size": 16, "num_boost_round": 50,
                  "iteration_opt": 4, "episode_rl": 8, "step_rl": 20, "k_range": [2, 6]},
    "dgp": {"num_inducing": 16, "pretrain_epochs": 5, "map_epochs": 5, "pool_size": 90, "predict_samples": 2,
            "sa_n_iter": 40, "sa_parallel_size": 16,
            "source_tuner": {"name": "autotvm", "plan_size": 8, "sa_n_iter": 40, "sa_parallel_size": 16}},
    "ann": {"max_iter": 100}, "bt": {"n_estimators": 20}, "dac19": {"num_boost_round": 20, "rted_pool": 60},
    "cgp": {"max_iterations": 3, "fit_steps": 5, "refit_steps": 2, "eipv_samples": 16},
    "dcgp": {"max_iterations": 3, "fit_steps": 5, "refit_steps": 2, "deep_kernel": [16, 8, 4]},
    "fpl18": {"max_iterations": 3, "fit_steps": 5, "refit_steps": 2},
    "mes": {"max_iterations": 3, "fit_steps": 5, "refit_steps": 2, "mes_samples": 3, "mes_pool": 60},
    "flextensor": {"n_init": 8, "epochs": 2},
    "metaschedule": {"num_trials_per_iter": 8, "population_size": 32, "init_min_unmeasured": 8},
    "mapspace_bo": {"n_init": 4, "n_candidates": 128, "sobol_samples": 8, "fit_maxiter": 20},
    "salsa": {"iterations": 10, "max_idle_runs": 30},
    "gat": {"num_trials_per_iter": 8, "population_size": 32, "init_min_unmeasured": 8,
            "epochs": 3, "online_epochs": 2, "graph_hidden": 16, "batch_size": 16},
}

# Rules a method is known to break with its default settings: reported, not hidden. Its test is an
# expected failure (xfail) until the method is fixed; then pytest reports it as XPASS.
_THREADED_SEARCH = ("MetaSchedule's evolutionary search runs on num_threads threads (default: os.cpu_count()) "
                    "and draws differently on every run with more than one; with num_threads=1 it repeats")
KNOWN_FAILURES = {("metaschedule", "determinism"): _THREADED_SEARCH, ("gat", "determinism"): _THREADED_SEARCH}


def make(name: str, **overrides) -> Method:
    """The one place the suite builds a method: its settings' defaults, then ``FAST``, then ``overrides``."""
    return make_method(name, **{**FAST.get(name, {}), **overrides})


@dataclass(frozen=True)
class Case:
    """A method on one kind of fake target it declares it runs on."""

    name: str
    needs: TargetNeeds

    def __str__(self) -> str:
        kind = {"single": "one objective", "multi": "several objectives"}[self.needs.objectives]
        return f"method={self.name} ({kind}, {self.needs.min_fidelities} fidelities)"

    @property
    def remeasures(self) -> bool:
        return METHODS[self.name].remeasures


def _checked() -> list[str]:
    """The names of the methods the suite checks: every registered one, or the one :data:`METHOD_ENV` names."""
    path = os.environ.get(METHOD_ENV)
    if not path:
        return sorted(METHODS)
    cls = plugin_method(path, None)
    return [next(name for name, c in METHODS.items() if c is cls)]


CASES = [Case(name, needs) for name in _checked() for needs in fitting_needs(METHODS[name].needs)]


def _params(rule: str, runs: bool = True) -> list:
    """pytest params of every case for ``rule``, ids ``<method>-<objectives>``: known failures
    (``KNOWN_FAILURES``) xfail; where the rule ``runs`` the method, cases that make TVM schedules
    (MetaSchedule's import alone takes 20-40 s) are marked slow."""
    out = []
    for c in CASES:
        marks = [pytest.mark.slow] if runs and c.needs.compiles else []
        if (c.name, rule) in KNOWN_FAILURES:
            marks.append(pytest.mark.xfail(reason=KNOWN_FAILURES[c.name, rule], strict=False))
        out.append(pytest.param(c, id=f"{c.name}-{c.needs.objectives}", marks=marks))
    return out


PURE = [c for c in CASES if not c.needs.compiles]


@dataclass
class Run:
    """One task tuned by one method: the loop's result, the fake target, the method's hook calls."""

    result: TaskResult
    target: FakeTarget
    method: Method
    calls: Counter = field(default_factory=Counter)
    asked: list = field(default_factory=list)  # (n, items returned) per ask
    reported: object = None  # what report() returned

    @property
    def new(self) -> list[Measurement]:
        """What this run measured (prior measurements left out)."""
        return self.result.measurements[len(self.result.measurements) - len(self.target.measured):]


def _watch(method: Method, run: Run) -> None:
    """Wrap the method's hooks on the instance: count every call, remember each ``ask``'s size and
    what ``report`` returned."""
    for hook in ("setup", "ask", "tell", "report"):
        original = getattr(method, hook)

        def wrapped(*args, _hook=hook, _original=original, **kwargs):
            run.calls[_hook] += 1
            out = _original(*args, **kwargs)
            if _hook == "ask":
                run.asked.append((args[0] if args else kwargs["n"], len(out)))
            elif _hook == "report":
                run.reported = out
            return out

        setattr(method, hook, wrapped)


@contextlib.contextmanager
def time_limit(seconds: int, what: str):
    """Raise TimeoutError after ``seconds``: a method that loops forever fails its test, not the session."""
    def expired(signum, frame):
        raise TimeoutError(f"{what} ran for more than {seconds} s: a loop that never ends?")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def run(case: Case, *, size: str = "normal", fail: bool = False, static: bool = False, budget: Budget = BUDGET,
        seed: int = SEED, prior: list[Measurement] | None = None) -> Run:
    """Tune the case's fake task once through ``tune_task``."""
    task, target, method = task_for(case.needs, size), target_for(case.needs, fail, static), make(case.name)
    out = Run(None, target, method)
    _watch(method, out)
    history = sibling_history(task, case.needs)
    with time_limit(RUN_LIMIT_S, f"{case} on a {size} space"):
        out.result = tune_task(task, method, target, budget, task_rng(seed, task), prior=prior, history=history)
    return out


@functools.cache
def plain_run(case: Case) -> Run:
    """The run most rules look at (shared: each case is tuned once for them)."""
    return run(case)


def key(m: Measurement) -> tuple:
    """What identifies a measured config: its index (a schedule: its trace text) and the fidelity."""
    return getattr(m.config, "trace", m.config.index), m.fidelity


def repeated(measurements: list[Measurement]) -> list[tuple]:
    counts = Counter(key(m) for m in measurements)
    return [k for k, c in counts.items() if c > 1]


def as_records(result: TaskResult) -> list[Measurement]:
    """The measurements as a resumed run reads them back from its record file."""
    space = result.task.space
    return [Measurement.from_record(record_line(m, result.task), space) for m in result.measurements]


@pytest.fixture(autouse=True)
def run_in_tmp_path(tmp_path, monkeypatch):
    """Methods that write files (exhaustive's table) write them into the test's folder."""
    monkeypatch.chdir(tmp_path)


# ---- what the suite itself relies on (fast for every method: nothing is built or run) ---------------
@pytest.mark.parametrize("case", _params("fits", runs=False))
def test_the_fake_target_fits_what_the_method_declares(case):
    cls = METHODS[case.name]
    assert not cls.needs.problems(target_for(case.needs).info), f"{case}: the fake target does not fit its needs"
    unknown = set(FAST.get(case.name, {})) - {f.name for f in dataclasses.fields(cls.Settings)}
    assert not unknown, f"FAST[{case.name!r}] sets {sorted(unknown)}: not hyperparameters of method={case.name}"
    assert {name for name, _ in KNOWN_FAILURES} | set(FAST) <= set(METHODS)


# ---- TVM stays out of the pure-Python methods (first: nothing has imported it yet) -----------------
def test_pure_python_methods_never_import_tvm():
    if "tvm" in sys.modules:
        pytest.skip("another module of this session imported TVM already")
    for case in PURE:
        plain_run(case)
        assert "tvm" not in sys.modules, f"{case} imported TVM"


# ---- 1. budget -----------------------------------------------------------------------------------
@pytest.mark.parametrize("case", _params("budget"))
def test_stays_within_the_budget(case):
    r, trials = plain_run(case), BUDGET.trials_per_task
    assert len(r.target.measured) == len(r.result.measurements) <= trials, \
        f"{case} measured {len(r.target.measured)} configs with a budget of {trials} trials"
    too_many = [(n, got) for n, got in r.asked if got > n]
    assert not too_many, f"{case}: ask(n) returned more than n items (n, returned): {too_many}"
    assert r.result.stop_reason in STOP_REASONS, f"{case}: stop reason {r.result.stop_reason!r}"


# ---- 2. determinism ------------------------------------------------------------------------------
@pytest.mark.parametrize("case", _params("determinism"))
def test_same_seed_measures_the_same_configs_in_the_same_order(case):
    a = [key(m) for m in plain_run(case).result.measurements]
    b = [key(m) for m in run(case).result.measurements]
    diverge = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    assert a == b, f"{case}: two runs with seed {SEED} differ from trial {diverge} on ({len(a)} and {len(b)} trials)"


# ---- 3. no config measured twice -------------------------------------------------------------------
def assert_measured_once(case: Case, measurements: list[Measurement], what: str = "") -> None:
    twice = repeated(measurements)
    assert not twice or case.remeasures, \
        f"{case}{what} measured (config, fidelity) {twice[:5]} more than once and does not declare remeasures"


@pytest.mark.parametrize("case", _params("measured_once"))
def test_never_measures_a_config_twice(case):
    assert_measured_once(case, plain_run(case).result.measurements)


# ---- 4. invalid measurements, small and empty spaces -----------------------------------------------
@pytest.mark.parametrize("case", _params("invalid"))
def test_survives_invalid_measurements(case):
    r = run(case, fail=True)
    assert r.result.n_invalid > 0, f"{case}: no injected failure was measured"
    assert len(r.result.measurements) <= BUDGET.trials_per_task and r.result.stop_reason in STOP_REASONS
    assert_measured_once(case, r.result.measurements, " with failures injected")


@pytest.mark.parametrize("size", ["small", "empty"])
@pytest.mark.parametrize("case", _params("exhausted"))
def test_ends_when_the_space_is_exhausted(case, size):
    """With a budget larger than the space (at every fidelity) the method ends the task by asking for
    nothing more (stop reason ``exhausted``), after measuring no config twice."""
    if size == "empty" and case.needs.compiles:
        pytest.skip("a method that makes its own schedules has no knob space to empty")
    space = task_for(case.needs, size).space
    room = EXHAUST_TRIALS if space is None else space.size * len(target_for(case.needs).fidelities) + 8
    r = run(case, size=size, budget=Budget(room))
    n = len(r.result.measurements)
    assert r.result.stop_reason == "exhausted" or case.remeasures, \
        f"{case} on a {size} space ({space.size if space else '?'} configs) stopped for " \
        f"{r.result.stop_reason!r} after {n} trials of {room}, not because it asked for nothing more"
    assert_measured_once(case, r.result.measurements, f" on a {size} space")


# ---- 5. report() once, by the loop ---------------------------------------------------------------
@pytest.mark.parametrize("case", _params("report"))
def test_report_is_called_once_by_the_loop(case):
    r = plain_run(case)
    assert r.calls["setup"] == 1 and r.calls["report"] == 1, f"{case}: hook calls {dict(r.calls)}"
    assert r.result.report == dict(r.reported or {}), f"{case}: TaskResult.report is not what report() returned"


# ---- 6. resume -----------------------------------------------------------------------------------
@pytest.mark.parametrize("case", _params("resume"))
def test_resumes_from_its_records(case):
    prior = as_records(run(case, budget=Budget(BUDGET.trials_per_task // 2)).result)
    cont = run(case, prior=prior)
    total = len(cont.result.measurements)
    assert cont.result.measurements[:len(prior)] == prior and total == len(prior) + len(cont.target.measured)
    assert total <= BUDGET.trials_per_task, f"{case}: {total} trials after resuming, budget {BUDGET.trials_per_task}"
    again = {key(m) for m in cont.new} & {key(m) for m in prior}
    assert not again or case.remeasures, \
        f"{case} measured again, after resuming, (config, fidelity) {sorted(again, key=str)[:5]} of its records"


# ---- 7. configs the target rejects before measuring ------------------------------------------------
@pytest.mark.parametrize("case", _params("static"))
def test_survives_configs_the_target_rejects_before_measuring(case):
    r = run(case, static=True)
    told = [key(m) for m in r.result.static_rejected]
    assert not any(static_rejects(m.config) for m in r.result.measurements), \
        f"{case}: a rejected config took a trial (its rejections in a row stayed below the loop's bound)"
    assert len(r.result.measurements) <= BUDGET.trials_per_task and r.result.stop_reason in STOP_REASONS
    again = [i for i, n in Counter(told).items() if n > 1]
    assert not again or case.remeasures, f"{case} proposed again (config, fidelity) {again[:5]}, told the target rejects them"
    assert_measured_once(case, r.result.measurements, " with static rejections")
