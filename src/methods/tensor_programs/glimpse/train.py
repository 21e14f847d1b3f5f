"""Offline training of Glimpse's three parts on groups of measured configs ([Ahn-PhD] §4.4, Fig. 4.3's dotted
arrows). :func:`train` builds a :class:`~tunebench.methods.tensor_programs.glimpse.model.GlimpseModel`:

1. **Blueprint**: the PCA of each family's catalogue (unsupervised; no measurement of any device enters it).
2. **Prior generator** (§4.4.1): for each measured group, the target distribution of knob k is the frequency
   of each value among the group's best ``top_fraction`` configs (at least 2), smoothed; H minimizes the
   cross-entropy of its p_k to it, summed over knobs and groups (Adam). Its number of epochs (the thesis
   gives none) is chosen by leave-one-hardware-out validation unless fixed: H is trained on all measured
   hardware but one, for each in turn, and the epoch count with the lowest mean cross-entropy on the
   left-out hardware is the one H is then trained for on all of them (:func:`choose_prior_epochs`): the
   method's claim is transfer to hardware it has not seen, so that is what its early stopping measures.
3. **Neural acquisition** (§4.4.2): meta-trained as in MetaBO [Volpp-ICLR20] with REINFORCE [Williams-ML92]
   (MetaBO uses PPO; the plain policy gradient is our simplification) on episodes replayed from the measured
   groups: start from the ``init`` configs the prior ranks highest, then at each of ``steps`` steps fit the GP
   to what was seen, score the unseen configs of the group, sample one from the softmax policy; the reward is
   the rise of the best normalized throughput; returns-to-go less the batch's mean return at that step.
   The prior an episode sees (its first configs and the log p input) is by default held out (``acq_prior``,
   ours; the thesis does not say): for a group measured on hardware h, the prior of H trained without h, at
   the chosen epoch count (:func:`held_out_priors`, the models that choose it). That is the prior tuning
   sees on new hardware. H's own prior was fit to every training group's best configs, so episodes on it
   start next to the best and teach the acquisition to trust the prior more than new hardware's deserves.
4. **Validity ensemble** (§4.4.3): each knob's logistic predictor minimizes the class-balanced binary
   cross-entropy of "invalid" over every labelled config (measured and static). With no invalid example at
   all, each predictor answers "valid" (bias -10).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

import numpy as np
import torch

from tunebench.methods.tensor_programs.glimpse.blueprint import FAMILIES, PCA, catalogue
from tunebench.methods.tensor_programs.glimpse.dataset import Group
from tunebench.methods.tensor_programs.glimpse.model import GlimpseModel
from tunebench.methods.tensor_programs.glimpse.networks import acquisition_inputs
from tunebench.methods.tensor_programs.glimpse.surrogate import GP

log = logging.getLogger(__name__)


@dataclass
class TrainSettings:
    dims: int = 4  # Blueprint dimensions (Fig. 4.4's knee on the CPU catalogue; docs/RESULTS.md §Glimpse)
    blueprint_mode: str = "spec"
    top_fraction: float = 0.1
    prior_epochs: int | None = None  # None: chosen by leave-one-hardware-out validation (choose_prior_epochs)
    prior_epochs_max: int = 300  # the longest H is trained while choosing (and where one hardware is measured)
    prior_check_every: int = 10  # epochs between two validation checks while choosing
    acq_prior: str = "held-out"  # the prior log p the acquisition trains on: "held-out" or "in-sample"
    acq_batches: int = 300
    acq_episodes: int = 8
    steps: int = 16
    init: int = 2
    validity_epochs: int = 300
    lr: float = 1e-2
    seed: int = 0


def _z(model: GlimpseModel, g: Group) -> torch.Tensor:
    return model.z(g.kind, g.shape, g.flops, g.hw)


def _knob_dims(groups: list[Group]) -> dict[str, int]:
    dims: dict[str, int] = {}
    for g in groups:
        for name, f in zip(g.knobs, g.feats):
            dims.setdefault(name, f.shape[1])
    return dims


def prior_targets(g: Group, top_fraction: float) -> list[np.ndarray]:
    """H's target for group ``g``: per knob, the frequency of each value among the group's best
    ``top_fraction`` configs (at least 2), smoothed (float32)."""
    top = np.argsort(-g.y)[: max(2, int(round(top_fraction * len(g.y))))]
    out = []
    for k, f in enumerate(g.feats):
        counts = np.bincount(g.digits[top, k], minlength=len(f)).astype(np.float32) + 0.05
        out.append(counts / counts.sum())
    return out


def prior_cross_entropy(model: GlimpseModel, g: Group, top_fraction: float = 0.1) -> float:
    """The cross-entropy from H's prior for ``g``'s layer and hardware to ``g``'s target, summed over knobs
    (the training loss of one group; on a held-out hardware's group: how well the prior generalizes)."""
    lps = model.knob_log_probs(g.knobs, g.feats, _z(model, g))
    return float(-sum((t * lp).sum() for t, lp in zip(prior_targets(g, top_fraction), lps)))


def uniform_cross_entropy(g: Group, top_fraction: float = 0.1) -> float:
    """:func:`prior_cross_entropy` of a uniform prior over each knob's values: the baseline H must beat."""
    return float(sum(-(t * math.log(1.0 / len(t))).sum() for t in prior_targets(g, top_fraction)))


def train_prior(model: GlimpseModel, groups: list[Group], s: TrainSettings, progress=None, epochs: int | None = None,
                on_epoch=None) -> list[float]:
    """Fit H for ``epochs`` (default ``s.prior_epochs``; see the module docstring); ``on_epoch(n)`` after each
    epoch ``n`` (1-based). Returns the loss per epoch."""
    epochs = s.prior_epochs if epochs is None else epochs
    data = []
    for g in groups:
        if g.y is None or not g.valid.any():
            continue
        targets = [torch.as_tensor(t) for t in prior_targets(g, s.top_fraction)]
        data.append((_z(model, g), {n: torch.as_tensor(f) for n, f in zip(g.knobs, g.feats)}, targets, g.knobs))
    opt = torch.optim.Adam(model.prior.parameters(), lr=s.lr)
    losses = []
    for ep in range(epochs if data else 0):
        opt.zero_grad()
        loss = torch.zeros(())
        for z, feats, targets, knobs in data:
            logp = model.prior.log_probs(z, feats)
            loss = loss - sum((t * logp[n]).sum() for n, t in zip(knobs, targets))
        loss = loss / len(data)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
        if on_epoch:
            on_epoch(ep + 1)
        if progress and (ep % 50 == 0 or ep == epochs - 1):
            progress("prior", ep, float(loss.detach()))
    return losses


@dataclass
class HeldOut:
    """H trained without each measured hardware in turn, scored on the one left out at every checked epoch:
    ``loss``: the mean held-out cross-entropy per checked epoch; ``logp``: per checked epoch, per group of the
    list given (None for a group without a valid measurement), the held-out prior's log p of its configs."""

    checked: list[int]
    loss: list[float]
    logp: list[list[np.ndarray | None]]

    def at(self, epochs: int) -> list[np.ndarray | None]:
        return self.logp[self.checked.index(epochs)]


def held_out_priors(new_model, groups: list[Group], s: TrainSettings, checked: list[int],
                    progress=None) -> HeldOut | None:
    """:class:`HeldOut` over ``groups`` (None with fewer than two measured hardware: nothing to hold out).
    ``new_model()``: a fresh model; each left-out hardware's starts from the same seed."""
    usable = [i for i, g in enumerate(groups) if g.y is not None and g.valid.any()]
    hws = sorted({groups[i].hw.name for i in usable})
    if len(hws) < 2:
        return None
    total = np.zeros(len(checked))
    logp: list[list[np.ndarray | None]] = [[None] * len(groups) for _ in checked]
    for n_hw, hw in enumerate(hws):
        torch.manual_seed(s.seed)
        model = new_model()
        held = [i for i in usable if groups[i].hw.name == hw]

        def check(n: int, model=model, held=held) -> None:
            if n not in checked:
                return
            c = checked.index(n)
            total[c] += np.mean([prior_cross_entropy(model, groups[i], s.top_fraction) for i in held])
            for i in held:
                g = groups[i]
                logp[c][i] = prior_logp(model, _z(model, g), g.knobs, g.feats, g.digits)

        train_prior(model, [groups[i] for i in usable if groups[i].hw.name != hw], s, epochs=checked[-1],
                    on_epoch=check)
        if progress:
            progress("held-out-prior", n_hw, float(total.min() / (n_hw + 1)))
    return HeldOut(checked, [float(v) for v in total / len(hws)], logp)


def choose_prior_epochs(new_model, groups: list[Group], s: TrainSettings,
                        progress=None) -> tuple[int, HeldOut | None]:
    """H's epoch count by leave-one-hardware-out validation over the measured ``groups`` (see the module
    docstring), checked every ``s.prior_check_every`` epochs up to ``s.prior_epochs_max``, and the
    :class:`HeldOut` it was chosen on. With one hardware measured there is nothing to hold out:
    ``(s.prior_epochs_max, None)``. ``new_model()``: a fresh model."""
    checked = list(range(s.prior_check_every, s.prior_epochs_max + 1, s.prior_check_every))
    held = held_out_priors(new_model, groups, s, checked, progress)
    return (checked[int(np.argmin(held.loss))] if held else s.prior_epochs_max), held


def prior_logp(model: GlimpseModel, z: torch.Tensor, knobs: list[str], feats: list[np.ndarray],
               digits: np.ndarray) -> np.ndarray:
    """log p(config) = Σ_k log p_k(v_k) of configs given by their entity ``digits`` (n, n_knobs)."""
    return sum(lp[digits[:, k]] for k, lp in enumerate(model.knob_log_probs(knobs, feats, z)))


def replay_step(X: np.ndarray, y: np.ndarray, seen: list[int], rest: np.ndarray, logp: np.ndarray,
                theta: np.ndarray, frac: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """One step of a replayed episode: the GP fitted to the ``seen`` configs' ``y``, and for the ``rest``:
    the acquisition's inputs (budget fraction ``frac``), the GP's mean and spread; and the best seen."""
    gp = GP().fit(X[seen], y[seen])
    mu, sd = gp.predict(X[rest])
    best = float(y[seen].max())
    return acquisition_inputs(mu, sd, logp[rest], best, gp.y_std, frac, theta), mu, sd, best


def replay_episode(y: np.ndarray, logp: np.ndarray, init: int, steps: int, pick) -> list[int]:
    """The configs an episode over a measured group sees, in order: the ``init`` its prior ranks highest,
    then one per step ``t`` of ``steps`` (fewer when the group runs out), ``rest[pick(t, seen, rest)]`` of the
    unseen ``rest``."""
    seen = list(np.argsort(-logp, kind="stable")[:init])
    for t in range(steps):
        rest = np.setdiff1d(np.arange(len(y)), seen)
        if len(rest) == 0:
            break
        seen.append(int(rest[pick(t, seen, rest)]))
    return seen


def _episode(model: GlimpseModel, prepared: tuple, s: TrainSettings,
             gen: torch.Generator) -> tuple[list[torch.Tensor], list[float]]:
    """One replayed tuning episode on a prepared group ``(group, config vectors, prior log p, Θ)``, the policy
    sampling from the softmax of its scores: the policy's log-probabilities and the rewards, per step."""
    g, X, logp, theta = prepared
    logps, rewards = [], []

    def pick(t: int, seen: list[int], rest: np.ndarray) -> int:
        inputs, _, _, best = replay_step(X, g.y, seen, rest, logp, theta, t / s.steps)
        log_pi = torch.log_softmax(model.acquisition(torch.as_tensor(inputs)), 0)
        a = int(torch.multinomial(log_pi.exp(), 1, generator=gen)[0])
        logps.append(log_pi[a])
        rewards.append(max(0.0, float(g.y[rest[a]]) - best))
        return a

    replay_episode(g.y, logp, s.init, s.steps, pick)
    return logps, rewards


def train_acquisition(model: GlimpseModel, groups: list[Group], s: TrainSettings, progress=None,
                      logp: list[np.ndarray | None] | None = None) -> list[float]:
    """Meta-train the neural acquisition by REINFORCE on replayed episodes; returns the mean return per batch.
    ``logp``: per group, the prior's log p of its configs that the episodes see (default: ``model``'s own)."""
    usable = [i for i, g in enumerate(groups) if g.y is not None and len(g.y) >= s.init + 4 and g.valid.any()]
    if not usable:
        return []
    rng = np.random.default_rng(s.seed)
    gen = torch.Generator().manual_seed(s.seed)
    prepared = []
    for i in usable:
        g = groups[i]
        lp = logp[i] if logp is not None else None
        if lp is None:
            lp = prior_logp(model, _z(model, g), g.knobs, g.feats, g.digits)
        prepared.append((g, g.config_vectors(), lp, model.theta(g.hw)))
    opt = torch.optim.Adam(model.acquisition.parameters(), lr=s.lr / 3)
    history = []
    for b in range(s.acq_batches):
        episodes = [_episode(model, prepared[rng.integers(len(prepared))], s, gen) for _ in range(s.acq_episodes)]
        returns = [np.cumsum(r[::-1])[::-1] for _, r in episodes]
        width = max(len(r) for r in returns)
        padded = np.array([np.pad(r, (0, width - len(r))) for r in returns])
        baseline = padded.mean(axis=0)
        loss = torch.zeros(())
        for (lps, _), ret in zip(episodes, returns):
            for t, lp in enumerate(lps):
                loss = loss - lp * float(ret[t] - baseline[t])
        opt.zero_grad()
        (loss / len(episodes)).backward()
        opt.step()
        history.append(float(np.mean([r[0] if len(r) else 0.0 for r in returns])))
        if progress and (b % 25 == 0 or b == s.acq_batches - 1):
            progress("acquisition", b, history[-1])
    return history


def train_validity(model: GlimpseModel, groups: list[Group], s: TrainSettings, progress=None) -> dict:
    """Fit each knob's invalidity predictor (see the module docstring); returns counts per knob."""
    rows: dict[str, list] = {n: [] for n in model.validity_dims}
    for g in groups:
        z = _z(model, g).numpy()
        for k, name in enumerate(g.knobs):
            if name in rows:
                rows[name].append((g.feats[k][g.digits[:, k]], np.repeat(z[None], len(g.valid), 0), ~g.valid))
    counts = {}
    for name, parts in rows.items():
        head = model.validity.heads[name]
        labels = np.concatenate([p[2] for p in parts]) if parts else np.zeros(0, bool)
        counts[name] = {"configs": int(len(labels)), "invalid": int(labels.sum())}
        if not labels.any() or labels.all():
            with torch.no_grad():
                head.weight.zero_()
                head.bias.fill_(-10.0 if not labels.any() else 10.0)
            continue
        feats = torch.as_tensor(np.concatenate([p[0] for p in parts]))
        ctx = torch.as_tensor(np.concatenate([p[1] for p in parts]))
        y = torch.as_tensor(labels.astype(np.float32))
        x = torch.cat([feats, ctx], dim=1)
        loss_fn = torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor(float((~labels).sum() / labels.sum())))
        opt = torch.optim.Adam(head.parameters(), lr=s.lr)
        for _ in range(s.validity_epochs):
            opt.zero_grad()
            loss = loss_fn(head(x).squeeze(-1), y)
            loss.backward()
            opt.step()
        counts[name]["loss"] = float(loss.detach())
    if progress:
        progress("validity", 0, float(sum(c["invalid"] for c in counts.values())))
    return counts


def model_factory(groups: list[Group], s: TrainSettings):
    """``new_model()``: an untrained model for ``groups``' hardware families and knobs under ``s``."""
    families = sorted({g.hw.family for g in groups}, key=FAMILIES.index)
    pcas = {f: PCA.fit(catalogue(f)[1]) for f in families}
    measured = [g for g in groups if g.y is not None]

    def new_model() -> GlimpseModel:
        return GlimpseModel(pcas, s.dims, s.blueprint_mode, _knob_dims(measured), _knob_dims(groups))

    return new_model


def train(groups: list[Group], s: TrainSettings | None = None, progress=None) -> GlimpseModel:
    """A Glimpse model trained on ``groups`` (see the module docstring); ``progress(part, step, value)``."""
    s = s or TrainSettings()
    tic = time.perf_counter()
    measured = [g for g in groups if g.y is not None]
    new_model = model_factory(groups, s)
    if s.acq_prior not in ("held-out", "in-sample"):
        raise ValueError(f"acq_prior={s.acq_prior!r}: held-out or in-sample")
    if s.prior_epochs is None:
        epochs, held = choose_prior_epochs(new_model, measured, s, progress)
    else:
        epochs = s.prior_epochs
        held = (held_out_priors(new_model, measured, s, [epochs], progress) if s.acq_prior == "held-out"
                else None)
    choice = {"checked": held.checked, "loss": held.loss} if held and s.prior_epochs is None else {}
    torch.manual_seed(s.seed)
    model = new_model()
    prior_loss = train_prior(model, measured, s, progress, epochs=epochs)
    acq_logp = held.at(epochs) if held and s.acq_prior == "held-out" else None
    returns = train_acquisition(model, measured, s, progress, logp=acq_logp)
    validity = train_validity(model, groups, s, progress)
    model.info = {"hardware": sorted({g.hw.name for g in groups}), "settings": vars(s), "prior_epochs": epochs,
                  "prior_epochs_choice": choice,
                  "acquisition_prior": "held-out" if acq_logp is not None else "in-sample",
                  "prior_loss": [prior_loss[0], prior_loss[-1]] if prior_loss else [],
                  "acquisition_return": [float(np.mean(returns[:10])), float(np.mean(returns[-10:]))]
                  if returns else [], "validity": validity, "seconds": time.perf_counter() - tic}
    return model
