"""``method=glimpse``: hardware-spec-aware tuning ([Ahn-PhD] Ch. 4, Algorithm 4; docs/METHODS.md §glimpse).

Per task, with a trained model (``method.pretrained``):

1. Θ, the Blueprint of the target's hardware (:mod:`~tunebench.methods.tensor_programs.glimpse.blueprint`), and Π, the
   layer's specification, give the prior p_k of every knob (H, §4.4.1). The first round measures the
   prior's most probable configs: the per-knob argmaxes and their next-best combinations, ranked by Σ log p_k
   (a beam over the knobs).
2. Each later round fits the GP cost model f̂ to the measured throughputs, runs AutoTVM's simulated
   annealing on f̂'s mean (line 7) for the ``candidates`` best predicted unvisited configs (optionally with
   ``random_candidates`` random unvisited ones beside them), and ranks them with the meta-learned
   acquisition (line 8; inputs: f̂'s mean and spread, the prior log-probability, the budget used, Θ).
3. The validity ensemble (line 10) drops candidates more than τ of its per-knob predictors call invalid;
   the best-ranked survivors are measured.

Without a model, or with a part switched off (``use_prior``, ``use_acquisition``, ``use_validity``): a uniform
prior (random first round), expected improvement, no filter. Everything runs inside ``ask``/``tell``: the
search clock covers it.
"""

from __future__ import annotations

import logging
import math

import numpy as np

from tunebench.errors import UserError
from tunebench.methods.annealing import SimulatedAnnealing, index_digits
from tunebench.methods.base import Method, TargetNeeds
from tunebench.methods.tensor_programs.autotvm.tuner import throughput
from tunebench.methods.tensor_programs.glimpse.settings import GlimpseSettings
from tunebench.search_space import Config
from tunebench.task import Measurement

log = logging.getLogger(__name__)

_MODELS: dict[tuple, object] = {}  # (real path, mtime, size) -> GlimpseModel: one load per file per process


def load_model(path: str):
    """The Glimpse model in ``path`` (cached per file version)."""
    import os

    from tunebench.methods.tensor_programs.glimpse.model import GlimpseModel

    st = os.stat(path)
    key = (os.path.realpath(path), st.st_mtime_ns, st.st_size)
    if key not in _MODELS:
        _MODELS[key] = GlimpseModel.load(path)
    return _MODELS[key]


def expected_improvement(mu: np.ndarray, sd: np.ndarray, best: float) -> np.ndarray:
    """EI of maximizing, for the acquisition switched off or untrained."""
    from scipy.stats import norm

    sd = np.maximum(sd, 1e-9)
    z = (mu - best) / sd
    return (mu - best) * norm.cdf(z) + sd * norm.pdf(z)


def beam_configs(logp: list[np.ndarray], width: int) -> list[tuple[float, tuple[int, ...]]]:
    """The ``width`` most probable digit combinations under independent per-knob log-probabilities, by a
    beam over the knobs in order (exact for width >= the space size); ``(Σ log p, digits)``, best first."""
    beam: list[tuple[float, tuple[int, ...]]] = [(0.0, ())]
    for lp in logp:
        order = np.argsort(-lp, kind="stable")[:width]
        beam = sorted(((s + float(lp[e]), d + (int(e),)) for s, d in beam for e in order),
                      key=lambda x: -x[0])[:width]
    return beam


class Glimpse(Method):
    """Glimpse (see the module docstring). Settings: :class:`~tunebench.methods.tensor_programs.glimpse.settings.GlimpseSettings`.

    ``rejected``: configs the validity ensemble turned down; ``source``: config index -> ``"prior"``,
    ``"acquisition"`` or ``"random"`` (why it was proposed)."""

    name = "glimpse"
    Settings = GlimpseSettings
    needs = TargetNeeds(objectives="single")

    def __init__(self, settings: GlimpseSettings | None = None, **overrides):
        super().__init__(settings, **overrides)
        s = self.settings
        self.sa_kw = dict(n_iter=s.sa_n_iter, parallel_size=s.sa_parallel_size, temp=(1.0, 0.0), persistent=True,
                          early_stop=s.sa_early_stop)

    # ---- before the run -------------------------------------------------------------------------
    def check_task(self, task, target_info) -> str | None:
        """The model's knobs cover the task's space, and the target has a Blueprint (before the run exists)."""
        s = self.settings
        if s.pretrained is None or task.space is None:
            return None
        from tunebench.methods.tensor_programs.glimpse.blueprint import hardware_of
        from tunebench.methods.tensor_programs.glimpse.encoding import knob_signature

        model = load_model(s.pretrained)
        try:
            model.theta(hardware_of(target_info.tvm_target, target_info.device_name))
        except UserError as exc:
            return str(exc).removeprefix("method=glimpse: ")
        problem = model.knob_problem(knob_signature(task.space)) if s.use_prior else None
        return f"method.pretrained={s.pretrained} {problem}" if problem else None

    # ---- per task -------------------------------------------------------------------------------
    def setup(self, task, target_info, history, budget, rng) -> None:
        super().setup(task, target_info, history, budget, rng)
        from tunebench.methods.tensor_programs.glimpse.encoding import entity_features

        s = self.settings
        self.feats = entity_features(self.space)
        self.model = load_model(s.pretrained) if s.pretrained else None
        self.theta = np.zeros(0, dtype=np.float32)
        self.logp = [np.full(len(f), -math.log(len(f))) for f in self.feats]
        self.votes: list[tuple[int, np.ndarray]] = []
        if self.model is not None:
            self._condition(task, target_info)
        self.sa = SimulatedAnnealing(**self.sa_kw)
        self.xs: dict[int, float] = {}
        self.rejected = 0
        self.source: dict[int, str] = {}
        self.first = self._prior_configs(s.init_samples) if s.use_prior and self.model is not None else []

    def _condition(self, task, target_info) -> None:
        """Θ, the prior log-probabilities per knob and the ensemble's invalid votes per knob value."""
        from tunebench.methods.tensor_programs.glimpse.blueprint import hardware_of

        s, m = self.settings, self.model
        self.hardware = hardware_of(target_info.tvm_target, target_info.device_name)
        self.theta = m.theta(self.hardware)
        z = m.z(task.kind, task.shape, task.flops, self.hardware)
        names = [k.name for k in self.space.knobs]
        if s.use_prior:
            self.logp = m.knob_log_probs(names, self.feats, z)
        if s.use_validity:
            self.votes = m.invalid_votes(names, self.feats, z)

    def _rejects(self, indices: np.ndarray) -> np.ndarray:
        """Which of ``indices`` the validity ensemble rejects (none without it)."""
        from tunebench.methods.tensor_programs.glimpse.networks import votes_reject

        if not self.votes or len(indices) == 0:
            return np.zeros(len(indices), dtype=bool)
        return votes_reject(self.votes, index_digits(self.space, indices), self.settings.tau)

    def _prior_configs(self, n: int) -> list[int]:
        """The prior's ``n`` most probable configs of the space that the ensemble accepts."""
        out = []
        for _, digits in beam_configs(self.logp, max(4 * n, 16)):
            contains = getattr(self.space, "contains_digits", None)
            if contains is not None and not contains(list(digits)):
                continue
            index = self.space.index_of_digits(list(digits))
            if self._rejects(np.array([index]))[0]:
                self.rejected += 1
                continue
            out.append(index)
            if len(out) == n:
                break
        return out

    # ---- proposing ------------------------------------------------------------------------------
    def ask(self, n: int) -> list[Config]:
        out: list[int] = []
        while self.first and len(out) < n:
            index = self.first.pop(0)
            if index not in self.visited:
                out.append(index)
                self.source[index] = "prior"
        if len(out) < n and any(v > 0 for v in self.xs.values()):
            for index in self._model_configs(n - len(out), set(out)):
                out.append(index)
                self.source[index] = "acquisition"
        if len(out) < n:
            for index in self._random_accepted(n - len(out), set(out)):
                out.append(index)
                self.source.setdefault(index, "random")
        self.visited.update(out)
        return [self.space.get(i) for i in out]

    def _random_accepted(self, n: int, taken: set[int]) -> list[int]:
        """Random unvisited configs, those the ensemble accepts first."""
        exclude = self.visited | taken
        pool = self.space.sample(self.rng, min(self.space.size - len(exclude), 4 * n), exclude=exclude)
        arr = np.array(pool, dtype=np.int64)
        rej = self._rejects(arr)
        chosen = np.concatenate([arr[~rej], arr[rej]])[:n]
        self.rejected += int(np.isin(arr[rej], chosen, invert=True).sum()) if rej.any() else 0
        return [int(i) for i in chosen]

    def _vectors(self, indices: np.ndarray) -> np.ndarray:
        from tunebench.methods.tensor_programs.glimpse.encoding import gather

        return gather(self.feats, index_digits(self.space, indices))

    def _model_configs(self, n: int, taken: set[int]) -> list[int]:
        """Fit f̂, anneal on its mean, rank SA's candidates by the acquisition, drop the rejected ones."""
        from tunebench.methods.tensor_programs.glimpse.surrogate import GP

        idx = np.fromiter(self.xs.keys(), dtype=np.int64)
        y = np.fromiter(self.xs.values(), dtype=np.float64)
        y = y / y.max()
        gp = GP().fit(self._vectors(idx), y)
        exclude = self.visited | taken
        best = self.sa.find_maximums(self.space, lambda ix: gp.predict(self._vectors(ix))[0],
                                     self.settings.candidates, exclude, self.rng)
        n_random = min(self.settings.random_candidates, self.space.size - len(exclude) - len(best))
        extra = self.space.sample(self.rng, max(0, n_random), exclude=exclude | set(best))
        pool = np.array(best + extra, dtype=np.int64)
        if len(pool) == 0:
            return []
        mu, sd = gp.predict(self._vectors(pool))
        scores = self._acquisition(pool, mu, sd, float(y.max()), gp.y_std)
        order = pool[np.argsort(-scores, kind="stable")]
        rej = self._rejects(order)
        keep = order[~rej][:n]
        if len(keep):  # the rejected ones ranked above the last config kept were turned down
            self.rejected += int(rej[: int(np.flatnonzero(order == keep[-1])[0])].sum())
        return [int(i) for i in keep]

    def _acquisition(self, pool: np.ndarray, mu: np.ndarray, sd: np.ndarray, best: float, y_std: float) -> np.ndarray:
        if self.model is None or not self.settings.use_acquisition:
            return expected_improvement(mu, sd, best)
        import torch

        from tunebench.methods.tensor_programs.glimpse.networks import acquisition_inputs

        digits = index_digits(self.space, pool)
        logp = sum(lp[digits[:, k]] for k, lp in enumerate(self.logp))
        frac = min(1.0, len(self.visited) / max(1, self.budget.trials_per_task))
        with torch.no_grad():
            x = torch.as_tensor(acquisition_inputs(mu, sd, logp, best, y_std, frac, self.theta))
            return self.model.acquisition(x).numpy().astype(np.float64)

    # ---- learning -------------------------------------------------------------------------------
    def tell(self, measurements: list[Measurement]) -> None:
        super().tell(measurements)
        for m in measurements:
            self.xs[m.config.index] = throughput(m, self.task.flops)

    def report(self) -> dict:
        counts = {k: sum(1 for v in self.source.values() if v == k) for k in ("prior", "acquisition", "random")}
        out = {"rejected": self.rejected, **{f"from_{k}": v for k, v in counts.items()}}
        if self.model is not None:
            out["hardware"] = self.hardware.name
        return out
