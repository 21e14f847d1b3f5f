"""``method=dgp``: deep Gaussian process transfer learning ([Sun-ICCV21]; [Sun-PhD] Ch. 4; docs/METHODS.md §dgp).

Per task (a layer), in the harness's ask/tell loop:

1. **Group** the layer by (operator type, kernel size, padding, stride)
   (:mod:`~tunebench.methods.tensor_programs.dgp.layer_groups`).
2. **Source data**: the group's records in the run's :class:`~tunebench.history.History` -- records
   loaded with ``method.history=<record file | run folder | MLflow run id>`` (any method, any task of the
   group except this one), plus the layers of this run that dgp tuned as a group's *source*. With no
   source data the layer *is* its group's source: it is tuned with AutoTVM (``method.source_tuner``,
   the autotvm config) and all its measurements, invalid ones with 0 GFLOPS, become the group's history.
3. **Pre-train** the deep GP (:class:`~tunebench.methods.tensor_programs.dgp.model.DeepGP`) on the source data
   (features: :class:`TransferFeatures`; target: GFLOPS). Pre-trained once per group and source set,
   and reused by the group's later layers (cached in ``History.models``).
4. **Tuning set**: ``pool_size`` random configs of the layer's space, ranked by the DGP mean; the top
   ``tuning_set_size`` are measured (``tuning_set=random``: ``tuning_set_size`` random configs instead,
   the paper's ablation, [Sun-ICCV21] Fig. 7).
5. **MAP transfer**: maximize ELBO(tuning set) − λ‖θ − θ̃‖² from the pre-trained θ̃ ([Sun-ICCV21] Eq. 6).
6. **Search**: AutoTVM's simulated annealing with the tuned DGP mean as the score; the ``top_k`` best
   configs it finds (none measured before) are measured; the best measured config is the result.
   After that ``ask`` returns nothing, so the task ends with ``stop_reason="exhausted"``.

Budget: a layer measures ``tuning_set_size + top_k`` configs. When the task budget ``T`` is smaller,
``top_k`` becomes ``min(top_k, T // 2)`` and the tuning set the rest, ``min(tuning_set_size, T − top_k)``.

Accounting (docs/METHODS.md §dgp step 7): :meth:`DGP.report` gives the task's ``role`` (``"source"`` or
``"target"``) and ``pretrain_s``; the harness logs the run's ``search_time_s`` (everything) and
``search_time_excl_source_s`` (without source-layer tuning and pre-training).

Ablation (step 8): for every target layer, the RMSE (GFLOPS) on its measured tuning set of the
untuned DGP and of an XGBoost regressor (AutoTVM's model, ``loss_type=reg``) trained on the same
source data: ``rmse_dgp_untuned`` and ``rmse_xgb_history`` in the report (logged per task).
"""

from __future__ import annotations

import logging
import math
import time

import numpy as np

from tunebench.errors import UserError
from tunebench.history import History, HistoryTask
from tunebench.methods.annealing import SimulatedAnnealing
from tunebench.methods.base import Method, TargetNeeds
from tunebench.methods.tensor_programs.autotvm.tuner import AutoTVM, throughput
from tunebench.methods.tensor_programs.autotvm.xgb_model import KnobFeatures, XGBCostModel
from tunebench.methods.tensor_programs.dgp.layer_groups import group_name, history_group, task_group
from tunebench.methods.tensor_programs.dgp.settings import DGPSettings
from tunebench.search_space import Config, Space, SplitKnob
from tunebench.task import Measurement

log = logging.getLogger(__name__)

#: split factors are encoded as log2(factor) / LOG2_SCALE: absolute tile sizes (threads, vector
#: widths, cache tiles) mean the same on every layer, so the encoding must not depend on the axis length
LOG2_SCALE = 10.0


def _knob_rows(knob) -> np.ndarray:
    if isinstance(knob, SplitKnob):
        return np.array([[math.log2(f) / LOG2_SCALE for f in e] for e in knob.entities],
                        dtype=np.float32).reshape(len(knob.entities), knob.n_parts)
    n = len(knob.values)
    return np.array([[i / (n - 1) if n > 1 else 0.0] for i in range(n)], dtype=np.float32)


class TransferFeatures(KnobFeatures):
    """Config features that mean the same on every layer of a group: ``log2(factor)/10`` per split
    part (absolute, unlike ``Space.features``' ``log2(factor)/log2(length)``), ``i/(n-1)`` per choice.

    ``self(indices)`` -> float32 (n, n_features) for configs of ``space``; :meth:`from_dicts` encodes
    record config dicts (knob name -> value) of any layer with the same template.
    """

    def __init__(self, space: Space):
        self.space = space
        self.tables = [_knob_rows(k) for k in space.knobs]

    def from_dicts(self, configs: list[dict]) -> tuple[np.ndarray, np.ndarray]:
        """Encode config dicts; returns (features (m, n_features), kept row positions (m,)) -- a dict
        whose knobs do not match this space's template is skipped."""
        rows, kept = [], []
        for pos, config in enumerate(configs):
            row = []
            for knob in self.space.knobs:
                v = config.get(knob.name)
                if isinstance(knob, SplitKnob):
                    if not isinstance(v, (list, tuple)) or len(v) != knob.n_parts or min(v, default=0) < 1:
                        break
                    row.extend(math.log2(f) / LOG2_SCALE for f in v)
                else:
                    vals = [list(x) if isinstance(x, tuple) else x for x in knob.values]
                    if v not in vals:
                        break
                    row.append(vals.index(v) / (len(vals) - 1) if len(vals) > 1 else 0.0)
            else:
                rows.append(row)
                kept.append(pos)
        x = np.array(rows, dtype=np.float32).reshape(len(rows), self.space.n_features)
        return x, np.array(kept, dtype=np.int64)


def history_data(sources: list[HistoryTask], feats: TransferFeatures) -> tuple[np.ndarray, np.ndarray]:
    """(features (n, d), GFLOPS (n,)) of the source tasks' knob records; invalid records have 0 GFLOPS.
    Records of MetaSchedule traces and of other templates are skipped."""
    recs = [r for t in sources for r in t.records if "trace" not in (r.get("config") or {})]
    x, kept = feats.from_dicts([r["config"] for r in recs])
    y = np.array([record_throughput(recs[i]) for i in kept])
    return x, y


def record_throughput(rec: dict) -> float:
    """A record's GFLOPS as :func:`~tunebench.methods.tensor_programs.autotvm.tuner.throughput` gives a measurement's: 0 when
    invalid, from the latency when ``gflops`` is 0 or missing (a kernel with no FLOP count: 1/latency)."""
    if not rec.get("valid"):
        return 0.0
    if float(rec.get("gflops") or 0.0) > 0:
        return float(rec["gflops"])
    lat = rec.get("latency_s")
    if lat is None or not math.isfinite(float(lat)) or float(lat) <= 0:
        return 0.0
    return (int(rec.get("flops") or 0) or 1e9) / float(lat) / 1e9


def _rmse(pred: np.ndarray, y: np.ndarray) -> float:
    return float(np.sqrt(np.mean((np.asarray(pred) - np.asarray(y)) ** 2))) if len(y) else float("nan")


class DGP(Method):
    """Deep GP transfer learning; see the module docstring.

    Settings: :class:`~tunebench.methods.tensor_programs.dgp.settings.DGPSettings` (every hyperparameter with its source;
    ``source_tuner``: the AutoTVM settings of the method that tunes source layers; ``history``: read by the
    harness, which passes the loaded History to ``setup``).
    """

    name = "dgp"
    Settings = DGPSettings
    needs = TargetNeeds(objectives="single")  # as its source tuner and search, AutoTVM's (a product knob space)

    def __init__(self, settings: DGPSettings | None = None, **overrides):
        super().__init__(settings, **overrides)
        s = self.settings
        self.history_source = s.history
        self.source_cfg = s.source_tuner
        self.model_kw = dict(hidden_dims=s.hidden_dims, num_inducing=s.num_inducing)
        self.fit_kw = dict(epochs=s.pretrain_epochs, lr=float(s.pretrain_lr), batch_size=s.batch_size,
                           train_samples=s.train_samples)
        self.map_kw = dict(l2=float(s.map_l2), epochs=s.map_epochs, lr=float(s.map_lr), batch_size=s.batch_size,
                           train_samples=s.train_samples)
        self.max_history, self.pool_size = s.max_history, s.pool_size
        self.tuning_set_size, self.tuning_set, self.top_k = s.tuning_set_size, s.tuning_set, s.top_k
        self.predict_samples = s.predict_samples
        self.sa_kw = dict(n_iter=s.sa_n_iter, parallel_size=s.sa_parallel_size, temp=tuple(s.sa_temp),
                          persistent=False, early_stop=s.sa_early_stop)
        try:  # fail at construction (the harness validates the config before a run), not mid-run
            SimulatedAnnealing(**self.sa_kw)
        except (TypeError, ValueError) as exc:
            raise UserError(f"method: bad simulated annealing setting: {exc}") from None

    @classmethod
    def preload(cls, settings: DGPSettings, history) -> None:
        """``method.pretrained``: the DGP of :mod:`~tunebench.methods.tensor_programs.dgp.prepared`, kept under the key it
        was trained for; a task whose sources and settings give that key uses it (:meth:`_pretrained`)."""
        if settings.pretrained:
            from tunebench.methods.tensor_programs.dgp.prepared import load_pretrained

            key, model, _ = load_pretrained(settings.pretrained)
            history.models[("dgp-file", key)] = model

    # ---- setup -----------------------------------------------------------------------------
    def setup(self, task, target_info, history, budget, rng) -> None:
        super().setup(task, target_info, history, budget, rng)
        sources, x_hist, y_hist = self._begin(task, history)
        if not sources:
            self.info["role"] = "source"
            self.inner = AutoTVM(self.source_cfg)
            self.inner.setup(task, target_info, history, budget, rng)
            log.info("dgp %s: first layer of group %s: tuned with %s as the group's source", task.name,
                     self.info["group"], self.source_cfg.name)
            return
        self.info.update(role="target", n_history=int(len(y_hist)),
                         source_tasks=[t.task_id for t in sources])
        self.pretrained = self._pretrained(sources, x_hist, y_hist)
        self.x_hist, self.y_hist = x_hist, y_hist
        trials = budget.trials_per_task
        k = self.top_k if self.tuning_set_size + self.top_k <= trials else min(self.top_k, trials // 2)
        self.k_final = k
        self.tuning = self._tuning_set(min(self.tuning_set_size, trials - k))
        self.final: list[int] = []
        self.phase = "tuning"
        self.info.update(tuning_set_size=len(self.tuning), top_k=k)

    def _begin(self, task, history) -> tuple[list[HistoryTask], np.ndarray | None, np.ndarray | None]:
        """The task's group and features; its source tasks in ``history`` with their (features, GFLOPS),
        no sources when the group's records hold no usable valid one."""
        self.history = history if history is not None else History()
        self.group = task_group(task)
        self.inner: Method | None = None
        self.measured: dict[int, float] = {}  # config index -> GFLOPS (0 = invalid)
        self.info: dict = {"group": group_name(self.group), "pretrain_s": 0.0}
        self.feats = TransferFeatures(self.space)
        sources = self._sources()
        if not sources:
            return [], None, None
        x_hist, y_hist = history_data(sources, self.feats)
        if len(y_hist) < 2 or float(np.max(y_hist, initial=0.0)) <= 0:
            log.warning("dgp %s: the history of group %s has no usable valid records; tuning it as a source",
                        task.name, self.info["group"])
            return [], None, None
        return sources, x_hist, y_hist

    def pretrain(self, task, target_info, history, budget, rng):
        """dgp's preparation alone, as :meth:`setup` would do it with these arguments (the same draws of
        ``rng``): ``(its key, the DGP pre-trained on the task's source records in history)``, the model also
        kept in ``history.models``; None when the task has no source (it would be tuned as its group's source)."""
        super().setup(task, target_info, history, budget, rng)
        sources, x_hist, y_hist = self._begin(task, history)
        return (self.model_key(sources), self._pretrained(sources, x_hist, y_hist)) if sources else None

    def _sources(self) -> list[HistoryTask]:
        def keep(t: HistoryTask) -> bool:
            return (t.task_id != self.task.id and history_group(t) == self.group
                    and (t.origin == "loaded" or t.role == "source"))

        return self.history.select(keep)

    def model_key(self, sources) -> tuple:
        """What a pre-trained DGP depends on: the group, the source tasks (id, records), the settings."""
        return ("dgp", self.group, tuple((t.task_id, len(t.records)) for t in sources),
                tuple(sorted(self.model_kw.items())), tuple(sorted(self.fit_kw.items())), self.max_history)

    def _pretrained(self, sources, x, y):
        """The group's pre-trained DGP (trained now, or reused from an earlier layer of this run)."""
        from tunebench.methods.tensor_programs.dgp.model import DeepGP

        key = self.model_key(sources)
        cached = self.history.models.get(key)
        if cached is None:
            cached = self.history.models.get(("dgp-file", repr(key)))  # method.pretrained, read by preload
        if cached is not None:
            self.info["pretrain_cached"] = 1.0
            return cached
        if self.settings.pretrained:
            raise UserError(f"method.pretrained={self.settings.pretrained}: holds no DGP pre-trained for task "
                            f"{self.task.name}'s sources and settings ({len(y)} records of "
                            f"{', '.join(t.task_id for t in sources)}); write it for these sources, or give null")
        tic = time.perf_counter()
        if len(y) > self.max_history:
            keep = self.rng.choice(len(y), self.max_history, replace=False)
            x, y = x[keep], y[keep]
        model = DeepGP(x, seed=int(self.rng.integers(2**31)), **self.model_kw)
        model.fit(x, y, **self.fit_kw)
        self.info["pretrain_s"] = time.perf_counter() - tic
        self.info["pretrain_cached"] = 0.0
        log.info("dgp %s: pre-trained the DGP of group %s on %d records in %.1fs (ELBO loss %.3f -> %.3f)",
                 self.task.name, self.info["group"], len(y), self.info["pretrain_s"], model.last_fit["loss_first"],
                 model.last_fit["loss_last"])
        self.history.models[key] = model
        return model

    def _tuning_set(self, s: int) -> list[int]:
        if self.tuning_set == "random":
            return self.space.sample(self.rng, s)
        pool = np.array(self.space.sample(self.rng, min(self.pool_size, self.space.size)), dtype=np.int64)
        mean = self.pretrained.predict_mean(self.feats(pool), samples=self.predict_samples)
        order = np.argsort(-mean, kind="stable")[:s]
        return [int(i) for i in pool[order]]

    # ---- ask / tell ------------------------------------------------------------------------
    def ask(self, n: int) -> list[Config]:
        if self.inner is not None:
            return self.inner.ask(n)
        queue = self.tuning if self.phase == "tuning" else self.final
        out = []
        for index in queue:
            if len(out) >= n:
                break
            if index not in self.visited:
                self.visited.add(index)
                out.append(index)
        return [self.space.get(i) for i in out]

    def tell(self, measurements: list[Measurement]) -> None:
        if self.inner is not None:
            self.inner.tell(measurements)
            super().tell(measurements)
            return
        super().tell(measurements)
        for m in measurements:
            self.measured[m.config.index] = throughput(m, self.task.flops)
        if self.phase == "tuning" and all(i in self.measured for i in self.tuning):
            self._transfer()

    def _transfer(self) -> None:
        """MAP-tune the DGP on the measured tuning set, then plan the final configs with SA."""
        tic = time.perf_counter()
        idx = np.array(self.tuning, dtype=np.int64)
        x_t, y_t = self.feats(idx), np.array([self.measured[i] for i in self.tuning])
        self._ablation_rmse(x_t, y_t)
        self.tuned = self.pretrained.copy()
        d0 = {k: v.detach().clone() for k, v in self.tuned.state_dict().items()}
        self.tuned.fit_map(x_t, y_t, **self.map_kw)
        self.info["map_s"] = time.perf_counter() - tic
        self.info["map_distance"] = self.tuned.distance_to(d0)
        sa = SimulatedAnnealing(**self.sa_kw)
        seed = int(self.rng.integers(2**31))

        def score(indices: np.ndarray) -> np.ndarray:
            return self.tuned.predict_mean(self.feats(indices), samples=self.predict_samples, seed=seed)

        self.final = sa.find_maximums(self.space, score, self.k_final, self.visited, self.rng)
        self.info["sa_steps"] = sa.last_stats.get("steps", 0)
        self.info["transfer_s"] = time.perf_counter() - tic
        self.phase = "final"
        log.info("dgp %s: MAP transfer on %d tuning configs (%d valid, best %.1f GFLOPS) moved θ by %.3g; SA "
                 "planned %d configs; %.1fs", self.task.name, len(y_t), int(np.sum(y_t > 0)), float(np.max(y_t)),
                 self.info["map_distance"], len(self.final), self.info["transfer_s"])

    def _ablation_rmse(self, x_t: np.ndarray, y_t: np.ndarray) -> None:
        """RMSE (GFLOPS) on the tuning set of the untuned DGP and of XGBoost trained on the same history."""
        pred = self.pretrained.predict_mean(x_t, samples=self.predict_samples)
        self.info["rmse_dgp_untuned"] = _rmse(pred, y_t)
        xgb = XGBCostModel(self.space, loss_type="reg", params={"nthread": 1}, seed=int(self.rng.integers(2**31)))
        xgb.fit_features(self.x_hist, self.y_hist)
        self.info["rmse_xgb_history"] = _rmse(xgb.predict_features(x_t) * xgb.y_max, y_t)

    # ---- reporting -------------------------------------------------------------------------
    def report(self) -> dict:
        """What the harness logs for this task: ``role``, ``group``, ``pretrain_s`` and, for target
        layers, the tuning-set and transfer statistics and the ablation RMSEs (numbers are metrics)."""
        out = dict(self.info)
        if self.inner is None and self.phase == "final":
            fin = [i for i in self.final if i in self.measured]
            if fin:
                y = np.array([self.measured[i] for i in fin])
                x = self.feats(np.array(fin, dtype=np.int64))
                out["rmse_dgp_tuned_final"] = _rmse(self.tuned.predict_mean(x, samples=self.predict_samples), y)
                out["rmse_dgp_untuned_final"] = _rmse(self.pretrained.predict_mean(x, samples=self.predict_samples), y)
        return out
