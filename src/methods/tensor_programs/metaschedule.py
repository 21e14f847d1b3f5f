"""``method=metaschedule``: TVM's own tuner (successor of Ansor), driven through tunebench's loop.

MetaSchedule's pieces are used as they are -- the post-order-apply space generator with the
target's default schedule rules, postprocessors and mutators, the evolutionary search strategy and
the XGBoost cost model on per-store features -- but the candidates it proposes are measured by the
tunebench target (same builder, runner, timing, clock and records as every other method), and the
results are fed back exactly as MetaSchedule's task scheduler does: ``notify_runner_results`` to
the strategy, ``update`` to the cost model, tuning records committed to the database that the
evolutionary search draws its measured population from.

Candidates are :class:`~tunebench.search_space.TraceConfig` s (schedule traces), not knob configs.
MetaSchedule proposes ``num_trials_per_iter`` candidates per round; ``ask(n)`` hands them out ``n``
at a time and the next round is generated once all of a round's results are in (``tell``).

Settings: :class:`MetaScheduleSettings` (no TVM import: typing a config never loads TVM).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from tunebench.config.experiment import MethodSettings
from tunebench.config.knobs import FRACTION, NAME, NONNEG_INT, POS_INT, choice, knob, opt
from tunebench.methods.base import Budget, Method, TargetNeeds
from tunebench.search_space import TraceConfig, trace_to_json
from tunebench.targets.base import TargetInfo
from tunebench.task import Measurement, Task

logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)

_ES = "EvolutionarySearch default (meta_schedule/search_strategy/evolutionary_search.py)"


@dataclass
class SearchSettings(MethodSettings):
    """MetaSchedule's search, shared by ``metaschedule`` and ``gat`` (whose cost model differs). Values = TVM
    0.27 defaults unless noted (``gat``: "GA follows the default settings of TVM", [Sun-PhD] §5.4.1)."""

    num_trials_per_iter: int = knob(64, POS_INT, "candidates per search round; tune_tir's default "
                                                 "(meta_schedule/tir_integration.py). gat measures the best predicted; "
                                                 "[Sun-PhD] §5.4.1 measures 80")
    population_size: int = knob(512, POS_INT, _ES)
    init_measured_ratio: float = knob(0.2, FRACTION, "EvolutionarySearch default: share of the initial population "
                                                     "from measured records")
    init_min_unmeasured: int = knob(50, NONNEG_INT, "EvolutionarySearch default")
    max_fail_count: int = knob(5, NONNEG_INT, "EvolutionarySearch default: retries when sampling the initial "
                                              "population fails")
    genetic_num_iters: int = knob(4, NONNEG_INT, "EvolutionarySearch default: evolution iterations per round")
    genetic_mutate_prob: float = knob(0.85, FRACTION, "EvolutionarySearch default")
    genetic_max_fail_count: int = knob(10, NONNEG_INT, "EvolutionarySearch default")
    eps_greedy: float = knob(0.05, FRACTION, "EvolutionarySearch default: share of random candidates per round")
    num_threads: int | None = knob(None, opt(POS_INT), "threads for the search and the cost model's training "
                                                       "(gat: feature extraction); null = os.cpu_count(). More than one: the same "
                                                       "seed does not repeat the search (TVM's threads race); 1 does")


# the arguments of ms.search_strategy.EvolutionarySearch among SearchSettings' knobs
STRATEGY_KNOBS = ("population_size", "init_measured_ratio", "init_min_unmeasured", "max_fail_count",
                  "genetic_num_iters", "genetic_mutate_prob", "genetic_max_fail_count", "eps_greedy")


@dataclass
class MetaScheduleSettings(SearchSettings):
    """TVM MetaSchedule (tvm.s_tir.meta_schedule, TVM 0.27; [MetaSchedule]; docs/METHODS.md §metaschedule):
    post-order-apply space generator with the target's default schedule rules / postprocessors / mutators,
    evolutionary search, XGBoost cost model on per-store features. Candidates are measured by the tunebench
    target like every other method's."""

    name: str = knob("metaschedule", NAME, "the method")
    cost_model: str = knob("xgb", choice("xgb", "random"), "xgb (default, XGBModel with per-store-feature "
                                                           "extractor) | random (ablation)")


def import_metaschedule() -> None:
    """Import MetaSchedule and its tensor intrinsics now, once per process. TVM 0.27 parses ~250 TVMScript
    functions when ``tvm.s_tir.tensor_intrin`` is first imported, and each ``@T.prim_func`` calls
    ``inspect.stack()``. For a frame of a frozen module (the import machinery's, always on the stack during an
    import) ``inspect.getmodule`` finds no module by file name and scans all of ``sys.modules``, twice per
    frame: in a process that has PyTorch, MLflow and Optuna loaded (~3,800 modules) the import took 50 s on
    2 cores, 4 s without the scans. The frozen modules are entered in ``inspect``'s file-name cache first
    (:func:`_know_frozen_modules`), which gives the same frame infos without the scans. The harness builds
    methods before a task's clock starts, so what remains is not charged to the first task's search time
    (as the target's worker start-up is not)."""
    _know_frozen_modules()
    import tvm.s_tir.meta_schedule
    import tvm.s_tir.tensor_intrin  # noqa: F401


def _know_frozen_modules() -> None:
    """Map ``<frozen NAME>``, the file name of a frozen module's frames, to NAME in ``inspect.modulesbyfile``
    (the cache ``inspect.getmodule`` consults first). Such a module has no source to show either way, so
    ``inspect.stack()`` gives the same result, without a scan of ``sys.modules`` per frame."""
    import inspect
    import sys

    for name, module in list(sys.modules.items()):
        if getattr(getattr(module, "__spec__", None), "origin", None) == "frozen":
            inspect.modulesbyfile.setdefault(f"<frozen {name}>", name)


class MetaSchedule(Method):
    """TVM MetaSchedule evolutionary search with its XGBoost cost model (see module docstring).

    Settings: :class:`MetaScheduleSettings` (TVM 0.27's defaults, each with its source); a subclass with
    another cost model extends :class:`SearchSettings` (``gat``).
    """

    name = "metaschedule"
    Settings = MetaScheduleSettings
    needs = TargetNeeds(objectives="single", compiles=True)

    def __init__(self, settings: SearchSettings | None = None, **overrides):
        super().__init__(settings, **overrides)
        s = self.settings
        self.num_trials_per_iter = s.num_trials_per_iter
        self.strategy_args = {key: getattr(s, key) for key in STRATEGY_KNOBS}
        self.num_threads = s.num_threads or os.cpu_count() or 1
        import_metaschedule()

    def setup(self, task: Task, target_info: TargetInfo, history, budget: Budget, rng) -> None:
        import tvm
        import tvm.s_tir.meta_schedule as ms

        super().setup(task, target_info, history, budget, rng)
        self.tvm_target = tvm.target.Target(dict(target_info.tvm_target))
        self.ctx = ms.TuneContext(mod=task.mod, target=self.tvm_target, space_generator="post-order-apply",
                                  search_strategy=ms.search_strategy.EvolutionarySearch(**self.strategy_args),
                                  task_name=task.name, rand_state=int(rng.integers(1, 2**31 - 1)),
                                  num_threads=self.num_threads)
        self.database = ms.database.MemoryDatabase()
        self.cost_model = self._make_cost_model()
        self.ctx.pre_tuning(max_trials=budget.trials_per_task, num_trials_per_iter=self.num_trials_per_iter,
                            design_spaces=self.ctx.generate_design_space(), database=self.database,
                            cost_model=self.cost_model)
        self.workload = self.database.commit_workload(task.mod)
        self.args_info = ms.arg_info.ArgInfo.from_prim_func(task.mod["main"])
        self._round: list = []            # MeasureCandidates of the current round
        self._handed: dict[int, int] = {}  # candidate number -> position in the round
        self._results: dict[int, object] = {}  # position in the round -> RunnerResult
        self._next_pos = 0
        self._next_index = 0
        self._exhausted = False
        self._prior_mods: dict[int, list] = {}  # structural hash -> programs a resumed run measured before

    def _make_cost_model(self):
        """The cost model the evolutionary search ranks candidates with (subclasses plug in others)."""
        import tvm.s_tir.meta_schedule as ms

        return ms.cost_model.CostModel.create(self.settings.cost_model, num_tuning_cores=self.num_threads)

    # ---- ask / tell ------------------------------------------------------------------------
    def ask(self, n: int) -> list[TraceConfig]:
        out = []
        while len(out) < n:
            if self._next_pos >= len(self._round):
                if out or not self._next_round():
                    break
                continue
            cand = self._round[self._next_pos]
            self._next_pos += 1
            if self._measured_before(cand):
                continue
            cfg = TraceConfig(self._next_index, trace_to_json(cand.sch.trace))
            self._handed[cfg.index] = self._next_pos - 1
            self._next_index += 1
            out.append(cfg)
        return out

    def _next_round(self) -> bool:
        """Feed the finished round back and generate the next; False when the search has no more."""
        if self._round:
            self._finish_round()
        if self._exhausted:
            return False
        cands = self.ctx.generate_measure_candidates()
        if not cands:
            self._exhausted = True
            return False
        self._round, self._next_pos, self._results = list(cands), 0, {}
        return True

    def _measured_before(self, cand) -> bool:
        """The candidate's program was measured by an earlier attempt of a resumed run. The evolutionary
        search never proposes a program twice, but it checks only the programs it proposed itself, not
        the database's records: without this a resumed run could measure one of them again."""
        import tvm_ffi

        mods = self._prior_mods.get(int(tvm_ffi.structural_hash(cand.sch.mod)), [])
        return any(tvm_ffi.structural_equal(cand.sch.mod, mod) for mod in mods)

    def tell(self, measurements: list[Measurement]) -> None:
        super().tell(measurements)
        prior = [m for m in measurements if m.config.index not in self._handed]
        if prior:  # a resumed run: earlier attempts' records
            self._learn_from_prior(prior)
        for m in measurements:
            pos = self._handed.pop(m.config.index, None)
            if pos is not None:
                self._results[pos] = self._runner_result(m)

    # ---- MetaSchedule bookkeeping, as its task scheduler does it ----------------------------
    @staticmethod
    def _runner_result(m: Measurement):
        import tvm.s_tir.meta_schedule as ms

        if m.valid:
            return ms.runner.RunnerResult(run_secs=[float(m.latency_s)], error_msg=None)
        return ms.runner.RunnerResult(run_secs=None, error_msg=m.error or "invalid")

    def _commit(self, cands: list, results: list) -> None:
        import tvm.s_tir.meta_schedule as ms

        self.cost_model.update(self.ctx, cands, results)
        for c, r in zip(cands, results):
            if r.run_secs is not None:
                self.database.commit_tuning_record(ms.database.TuningRecord(
                    trace=c.sch.trace, workload=self.workload, run_secs=r.run_secs, target=self.tvm_target,
                    args_info=c.args_info))

    def _finish_round(self) -> None:
        """Feed a round's results back (only its measured candidates: the budget may end a round early)."""
        done = sorted(self._results)
        cands = [self._round[i] for i in done]
        results = [self._results[i] for i in done]
        if cands:
            self.ctx.notify_runner_results(cands, results)
            self._commit(cands, results)
        self._round, self._results = [], {}

    def _learn_from_prior(self, prior: list[Measurement]) -> None:
        """Commit a resumed run's earlier measurements to the database and the cost model."""
        import json

        import tvm
        import tvm.s_tir.meta_schedule as ms
        import tvm_ffi

        cands, results = [], []
        for m in prior:
            if not isinstance(m.config, TraceConfig):
                continue
            sch = tvm.s_tir.Schedule(self.task.mod)  # replaying on a fresh schedule keeps the trace
            tvm.s_tir.schedule.Trace.apply_json_to_schedule(json.loads(m.config.trace), sch)
            self._prior_mods.setdefault(int(tvm_ffi.structural_hash(sch.mod)), []).append(sch.mod)
            cands.append(ms.MeasureCandidate(sch, self.args_info))
            results.append(self._runner_result(m))
            self._next_index = max(self._next_index, m.config.index + 1)
        if cands:
            self._commit(cands, results)
