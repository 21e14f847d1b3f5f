"""The multi-fidelity multi-objective Bayesian-optimization driver ([Sun-PhD] Algorithm 2), ask/tell style.

Shared by ``cgp``, ``dcgp``, ``fpl18`` and ``mes``; they differ only in the surrogate (correlated ICM
or independent GPs, shallow or deep kernel), the fidelity chaining (NARGP or AR1) and the acquisition
(EIPV or MES), all set by hyperparameters.

Flow (one *iteration* = one Alg. 2 step):
1. Initial designs: ``n_init`` random designs nested across fidelities (X_impl ⊆ X_syn ⊆ X_hls), each
   asked at every fidelity it belongs to (every evaluation is one trial of the harness).
2. Objectives normalized (``objectives.ObjectiveScaler``), invalid designs at 10x the current worst.
3. Per iteration: fit one model per fidelity (chained), score every design not yet measured at that
   fidelity with acquisition_i (EIPV or MES) times rho_i = T_top / T_i (PEIPV, [Sun-PhD] Eq. 3.15), take
   the best (design, fidelity h) pair, ask it at fidelity h (and, with ``measure_lower``, at every
   cheaper fidelity where it has no report yet: "run the tool up to stage h", Alg. 2 line 13).
4. Stop (``ask`` returns []) after ``max_iterations`` iterations or when the hypervolume of the
   top-fidelity designs has not grown for ``patience`` consecutive iterations (Alg. 2 lines 16-18).
   The early stop lives in the method because it counts iterations, not trials, and it compares
   hypervolumes, not one latency; the harness then ends the task with stop reason ``exhausted``.
"""

from __future__ import annotations

import logging
import math
import time

import numpy as np
import torch

from tunebench.errors import UserError
from tunebench.methods.base import Method, TargetNeeds, first_phase_problem
from tunebench.methods.fpga_dse.mfgp import acquisition as acq
from tunebench.methods.fpga_dse.mfgp import costs as fidelity_costs
from tunebench.methods.fpga_dse.mfgp.chain import FidelityChain
from tunebench.methods.fpga_dse.mfgp.designs import nested_counts, nested_random
from tunebench.methods.fpga_dse.mfgp.final_set import final_designs, optimistic_front
from tunebench.methods.fpga_dse.mfgp.models import ICMGP, FitSettings, IndependentGP
from tunebench.methods.fpga_dse.mfgp.objectives import ObjectiveScaler, penalize_invalid
from tunebench.methods.fpga_dse.mfgp.settings import MFBOSettings

log = logging.getLogger(__name__)


class MultiFidelityBO(Method):
    """Correlated/independent multi-objective multi-fidelity BO over a pruned discrete design space.

    Settings: :class:`~tunebench.methods.fpga_dse.mfgp.settings.MFBOSettings` and each method's subclass
    (``CGPSettings``, ``DCGPSettings``, ``FPL18Settings``, ``MESSettings`` in
    src/methods/fpga_dse/mfgp/settings.py: every hyperparameter with its source). The settings' values are kept
    as attributes of the same names (``model`` as ``model_kind``, ``free_fidelity_ratio`` as
    ``free_ratio``; the marginal-likelihood fitting knobs as ``fit``, a ``FitSettings``).
    """

    name = "mfbo"
    Settings = MFBOSettings
    needs = TargetNeeds(objectives="multi", min_fidelities=2)

    def __init__(self, settings: MFBOSettings | None = None, **overrides):
        super().__init__(settings, **overrides)
        s = self.settings
        self.n_init = s.n_init
        self.max_init_fraction = None if s.max_init_fraction is None else float(s.max_init_fraction)
        self.max_iterations, self.patience = int(s.max_iterations), int(s.patience)
        self.model_kind, self.chaining = s.model, s.chaining
        self.deep_kernel = tuple(int(w) for w in s.deep_kernel) if s.deep_kernel else None
        self.task_rank = s.task_rank
        self.acquisition = s.acquisition
        self.eipv_samples, self.mes_samples, self.mes_pool = int(s.eipv_samples), int(s.mes_samples), int(s.mes_pool)
        self.fidelity_weighting = s.fidelity_weighting
        self.stage_seconds = list(s.stage_seconds) if s.stage_seconds is not None else None
        self.min_stage_s = float(s.min_stage_s)
        self.rho_max = float(s.rho_max) if s.rho_max is not None else None
        self.patience_scope = s.patience_scope
        self.free_ratio = None if s.free_fidelity_ratio is None else float(s.free_fidelity_ratio)
        self.final_pareto, self.final_beta = bool(s.final_pareto), float(s.final_beta)
        self.measure_lower = bool(s.measure_lower)
        self.ref_point = s.ref_point
        self.delay_factor, self.invalid_factor = float(s.delay_factor), float(s.invalid_factor)
        self.capacity_overrides = dict(s.capacity_overrides or {})
        self.fit = FitSettings(s.optimizer, int(s.fit_steps), int(s.refit_steps), float(s.lr), float(s.weight_decay))
        self.max_candidates = int(s.max_candidates)
        self.num_threads = int(s.num_threads)

    # ---- setup ----------------------------------------------------------------------------------
    def setup(self, task, target_info, history, budget, rng):
        super().setup(task, target_info, history, budget, rng)
        torch.set_num_threads(self.num_threads)
        self.objectives = list(target_info.objectives)
        self.fidelities = list(target_info.fidelities)
        if len(self.objectives) < 2 or not self.fidelities:
            raise UserError(f"method={self.name} needs a multi-objective target with fidelities (fpga_open, "
                            f"vivado, table); this target has objectives={self.objectives}, "
                            f"fidelities={self.fidelities}")
        L, M = len(self.fidelities), len(self.objectives)
        self.declared_costs = dict(target_info.fidelity_costs or {}) or None
        self.n_told = 0
        n_init = self._initial_counts(self.space.size, self.fidelities)
        ref = self.ref_point if isinstance(self.ref_point, (list, tuple)) else [self.ref_point] * M
        if len(ref) != M:
            raise UserError(f"method.ref_point={self.ref_point!r} needs one entry per objective {self.objectives}")
        self.ref = np.asarray(ref, dtype=float)
        if self.stage_seconds is not None and len(self.stage_seconds) != L:
            raise UserError(f"method.stage_seconds={self.stage_seconds!r} needs one entry per fidelity {self.fidelities}")
        self.capacity = dict(target_info.capacity or {})
        self.X_all = np.asarray(self.space.features(range(self.space.size)), dtype=np.float64)
        self.reports: list[dict[int, dict | None]] = [dict() for _ in range(L)]  # level -> index -> raw objectives (None: invalid)
        self.stage_times: dict[str, list[float]] = {}
        self.cost_times: list[list[float]] = [[] for _ in range(L)]
        self.free = fidelity_costs.free_levels(self._known_costs(self.fidelities, self.declared_costs), self.free_ratio)
        costly = [k for k in range(L) if k not in self.free]
        initial = nested_random(self.space.size, [n_init[k] for k in costly], self.rng)
        self.initial_ids = set(initial[0]) if initial else set()
        self.queue: list[tuple[int, int]] = [(i, k) for k in self.free for i in range(self.space.size)]
        self.queue += [(i, costly[j]) for j, ids in enumerate(initial) for i in ids]
        self.final_done = False
        self.initial_done = False
        self.iteration = 0
        self.stale = 0
        self.best_hv = -math.inf
        self.finished = ""
        self.scaler = None
        self.chain = None
        self._fitted_sizes = [-1] * L
        self.log: list[dict] = []  # one entry per iteration: chosen design/fidelity, acquisition values, seconds

    # ---- ask / tell --------------------------------------------------------------------------------
    def ask(self, n: int) -> list:
        if not self.queue and not self.finished:
            self._next_iteration()
        out, self.queue = self.queue[:n], self.queue[n:]
        return [(self.space.get(i), self.fidelities[k]) for i, k in out]

    def tell(self, measurements) -> None:
        super().tell(measurements)
        self.n_told += len(measurements)
        for m in measurements:
            fid = getattr(m, "fidelity", None)
            if fid not in self.fidelities:
                continue
            k = self.fidelities.index(fid)
            idx = m.config.index
            objs = dict(getattr(m, "objectives", {}) or {})
            ok = m.valid and all(o in objs and math.isfinite(objs[o]) for o in self.objectives)
            self.reports[k][idx] = objs if ok else None
            for stage, s in (getattr(m, "stage_s", {}) or {}).items():
                self.stage_times.setdefault(stage, []).append(float(s))
            self.cost_times[k].append(float(getattr(m, "cost_s", 0.0) or 0.0))
            self.queue = [q for q in self.queue if q != (idx, k)]

    # ---- data ------------------------------------------------------------------------------------
    def _level_data(self, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(indices [n], normalized penalized Y [n, M], valid [n]) of fidelity level k."""
        idx = np.array(sorted(self.reports[k]), dtype=np.int64)
        M = len(self.objectives)
        if not len(idx):
            return idx, np.zeros((0, M)), np.zeros(0, dtype=bool)
        valid = np.array([self.reports[k][i] is not None for i in idx])
        Y = np.array([self.scaler(self.reports[k][i]) if v else np.zeros(M) for i, v in zip(idx, valid)])
        return idx, penalize_invalid(Y, valid, self.invalid_factor), valid

    def top_hypervolume(self) -> float:
        """Hypervolume (normalized units, w.r.t. ``ref_point``) of the valid top-fidelity designs."""
        idx, Y, valid = self._level_data(len(self.fidelities) - 1)
        return acq.hypervolume(Y[valid], self.ref) if valid.any() else 0.0

    def _known_costs(self, fidelities: list[str], declared: dict | None) -> list[float] | None:
        """T_i known before anything is measured (``stage_seconds`` or the target's ``declared`` costs)."""
        if self.stage_seconds is None and not declared:
            return None
        return fidelity_costs.cumulative_seconds(fidelities, declared, self.stage_seconds, [], self.min_stage_s)

    def _initial_counts(self, space_size: int, fidelities: list[str]) -> list[int]:
        """``n_init`` per fidelity (cheapest first), capped at ``max_init_fraction`` of the space."""
        L = len(fidelities)
        n_init = self.n_init if isinstance(self.n_init, (list, tuple)) else [self.n_init] * L
        if len(n_init) < L:
            raise UserError(f"method.n_init={self.n_init!r} needs one entry per fidelity {fidelities}")
        n_init = [int(v) for v in n_init][-L:]
        if self.max_init_fraction is not None:
            cap = max(2, int(self.max_init_fraction * space_size))
            n_init = [min(v, cap) for v in n_init]
        return n_init

    def check_budget(self, task, target_info, budget):
        """The first phase: every design at the fidelities that are free from the start (known costs),
        then the nested initial designs at the others (Alg. 2 line 4), before the first BO iteration."""
        fids, size = list(target_info.fidelities), task.space.size
        if len(target_info.objectives) < 2 or not fids:
            return None  # setup says what is wrong
        free = fidelity_costs.free_levels(self._known_costs(fids, dict(target_info.fidelity_costs or {}) or None),
                                          self.free_ratio)
        costly = [k for k in range(len(fids)) if k not in free]
        initial = nested_counts(size, [self._initial_counts(size, fids)[k] for k in costly])
        parts = [f"all {size} designs at {fids[k]}" for k in free]
        parts += [f"{n} initial designs at {fids[k]}" for k, n in zip(costly, initial)]
        return first_phase_problem(self, task, budget, size * len(free) + sum(initial), ", ".join(parts))

    def fidelity_seconds(self) -> list[float]:
        """T_i per fidelity (cheapest first): known costs, else the stage times seen so far."""
        observed: list[float | None] = []
        for k, fid in enumerate(self.fidelities):
            seen = self.stage_times.get(fid)
            if seen:
                observed.append(float(np.mean(seen)))
            elif self.cost_times[k]:  # no per-stage split: the measurement's own charged seconds
                below = sum(v for v in observed if v is not None)
                observed.append(max(float(np.mean(self.cost_times[k])) - below, 0.0))
            else:
                observed.append(None)
        return fidelity_costs.cumulative_seconds(self.fidelities, self.declared_costs, self.stage_seconds,
                                                 observed, self.min_stage_s)

    def fidelity_rho(self) -> list[float]:
        """rho_i = T_top / T_i per fidelity (cheapest first; [Sun-PhD] Eq. 3.15), or all 1 when
        ``fidelity_weighting`` is ``none``."""
        L = len(self.fidelities)
        if self.fidelity_weighting == "none" or L == 1:
            return [1.0] * L
        return fidelity_costs.rho(self.fidelity_seconds(), self.rho_max)

    # ---- one BO iteration ---------------------------------------------------------------------------
    def _make_model(self, level: int, d_x: int, d_f: int):
        M = len(self.objectives)
        if self.model_kind == "icm":
            return ICMGP(d_x, d_f, M, rank=self.task_rank, deep=self.deep_kernel, fit=self.fit)
        return IndependentGP(d_x, d_f, M, link="ar1" if (self.chaining == "ar1" and d_f) else "none", fit=self.fit)

    def _sweep_free_levels(self) -> bool:
        """Costs not known up front: once the initial designs show them, queue every design not yet
        measured at the fidelities that turned out free (``costs.free_levels``). True if any was queued."""
        self.free = fidelity_costs.free_levels(self.fidelity_seconds(), self.free_ratio)
        self.queue = [(i, k) for k in self.free for i in range(self.space.size) if i not in self.reports[k]]
        return bool(self.queue)

    def _next_iteration(self) -> None:
        if not self.initial_done:
            if not self.free and self._sweep_free_levels():
                return
            self.initial_done = True
            initial = [r for level in self.reports for i, r in level.items()
                       if r is not None and i in self.initial_ids]
            self.scaler = ObjectiveScaler(self.objectives, self.capacity, initial, self.delay_factor,
                                          self.capacity_overrides)
            self.best_hv = self.top_hypervolume()
        else:
            hv = self.top_hypervolume()
            if hv > self.best_hv + 1e-12 * max(1.0, abs(self.best_hv)):
                self.best_hv, self.stale = hv, 0
            elif self.patience_scope == "all" or self.log[-1]["fidelity"] == self.fidelities[-1]:
                self.stale += 1
        if self.iteration >= self.max_iterations:
            self.finished = "max_iterations"
        elif self.stale >= self.patience:
            self.finished = "no_hypervolume_gain"
        if self.finished:
            log.info("%s stops after %d iterations: %s", self.name, self.iteration, self.finished)
            self._final_step()
            return
        t0 = time.perf_counter()
        L = len(self.fidelities)
        self._fit_chain()
        rho = self.fidelity_rho()
        best = (-math.inf, None, None)
        scores = {}
        for k in range(L):
            if not self.chain.fitted[k] or k in self.free:
                continue
            free = np.array([i for i in range(self.space.size) if i not in self.reports[k]], dtype=np.int64)
            if not len(free):
                continue
            if len(free) > self.max_candidates:
                free = np.sort(self.rng.choice(free, size=self.max_candidates, replace=False))
            a = self._acquisition(k, free)
            j = int(torch.argmax(a))
            value = rho[k] * float(a[j])
            scores[self.fidelities[k]] = {"index": int(free[j]), "acq": float(a[j]), "rho": rho[k]}
            if value > best[0]:
                best = (value, int(free[j]), k)
        if best[1] is None:
            self.finished = "exhausted"
            self._final_step()
            return
        _, idx, h = best
        levels = range(h + 1) if self.measure_lower else [h]
        self.queue = [(idx, k) for k in levels if idx not in self.reports[k]]
        self.iteration += 1
        self.log.append({"iteration": self.iteration, "index": idx, "fidelity": self.fidelities[h],
                         "peipv": best[0], "scores": scores, "hv": self.best_hv,
                         "seconds": time.perf_counter() - t0})
        log.info("%s iteration %d: design %d at %s (rho x %s: %s); top-fidelity HV %.4f, %d stale",
                 self.name, self.iteration, idx, self.fidelities[h], self.acquisition,
                 ", ".join(f"{f} {v['rho']:.1f} x {v['acq']:.3g}" for f, v in scores.items()),
                 self.best_hv, self.stale)

    def _fit_chain(self) -> None:
        """Fit the fidelity chain on every level's data (hyperparameters re-optimized where it grew)."""
        if self.chain is None:
            self.chain = FidelityChain(len(self.fidelities), self.X_all.shape[1], len(self.objectives),
                                       self._make_model, self.chaining)
        data = []
        for k in range(len(self.fidelities)):
            idx, Y, _ = self._level_data(k)
            data.append((self.X_all[idx], Y))
        sizes = [len(X) for X, _ in data]
        self.chain.fit(data, refit=[n != old for n, old in zip(sizes, self._fitted_sizes)])
        self._fitted_sizes = sizes

    def _final_step(self) -> None:
        """Queue the top fidelity's predicted Pareto designs (``final_set``) within the remaining trials."""
        top = len(self.fidelities) - 1
        if not self.final_pareto or self.final_done:
            return
        self.final_done = True
        self._fit_chain()
        if not self.chain.fitted[top]:
            return
        mean, cov = self.chain.predict(top, self.X_all)
        mean = mean.numpy()
        std = cov.diagonal(dim1=-2, dim2=-1).clamp_min(0).sqrt().numpy()
        idx, Y, valid = self._level_data(top)
        measured = {int(i): (Y[j] if valid[j] else None) for j, i in enumerate(idx)}
        front = optimistic_front(mean, std, self.final_beta, measured)
        remaining = self.budget.trials_per_task - self.n_told - len(self.queue)
        new = final_designs(front, (mean - self.final_beta * std).sum(axis=1), measured, remaining)
        self.learned = sorted({i for i in front if measured.get(i) is not None} | set(new))
        self.queue += [(i, top) for i in new]
        log.info("%s final step: %d predicted Pareto designs (beta %.2f), %d new at %s (%d trials left)",
                 self.name, len(front), self.final_beta, len(new), self.fidelities[top], remaining)

    def report(self) -> dict:
        return {"iterations": self.iteration, "stop": self.finished,
                "free_fidelities": [self.fidelities[k] for k in self.free],
                "fidelity_seconds": dict(zip(self.fidelities, self.fidelity_seconds())),
                "final_designs": len(self.learned) if self.learned is not None else 0}

    def _acquisition(self, k: int, free: np.ndarray) -> torch.Tensor:
        """Acquisition values [len(free)] of fidelity level k at the designs ``free``."""
        _, Y, _ = self._level_data(k)
        X = self.X_all[free]
        if self.acquisition == "mes":
            pool = free if len(free) <= self.mes_pool else None
            Xs = X if pool is not None else self.X_all[np.sort(self.rng.choice(free, self.mes_pool, replace=False))]
            mean_s, joint = self.chain.predict_joint(k, Xs)
            # include the measured designs' values: the sampled minimum cannot exceed the best seen
            gen = torch.Generator().manual_seed(int(self.rng.integers(2**31)))
            mins = acq.sample_min_values(mean_s, joint, self.mes_samples, gen)
            mins = torch.minimum(mins, torch.as_tensor(Y.min(axis=0))[None])
            mean, cov = self.chain.predict(k, X)
            std = cov.diagonal(dim1=-2, dim2=-1).clamp_min(0).sqrt()
            return acq.mes(mean, std, mins)
        mean, cov = self.chain.predict(k, X)
        lower, upper = acq.nondominated_cells(Y, self.ref)
        if self.model_kind == "icm":
            return acq.eipv_qmc(mean, cov, lower, upper, self.eipv_samples,
                                seed=int(self.rng.integers(2**31)))
        std = cov.diagonal(dim1=-2, dim2=-1).clamp_min(0).sqrt()
        return acq.eipv_independent(mean, std, lower, upper)

