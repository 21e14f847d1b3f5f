"""CHAMELEON's adaptive exploration ([Ahn-PhD] Ch. 2, §2.4.2, Tables 2.2 and 2.4): a PPO actor-critic that
moves every knob of a config by -1, 0 or +1 per step, rewarded by the cost model's predicted fitness.

- State: the config's feature vector (``Space.features``); action: one of (-1, 0, +1) per knob, applied to
  the knob's entity index and clipped to the knob's range (the "configuration updater"), so every move
  stays inside the space.
- Network: a first layer shared by the actor (3 logits per knob) and the critic (one value), as the thesis
  describes; widths ``hidden`` (our choice: 64; the thesis explored sizes, gives none).
- One :meth:`PPOExplorer.explore` call runs ``len(starts)`` episodes in parallel from the given configs for
  ``steps`` steps (``episode_rl`` 128 and ``step_rl`` 500 in Table 2.2), scores every visited config with
  ``fitness`` (the reward), then updates the agent with PPO: GAE advantages (discount 0.9, GAE 0.99),
  ``epochs`` 3 passes of the clipped objective (clip 0.3) + value loss (coefficient 1.0) - entropy bonus
  (0.1), Adam 1e-3 (Table 2.4). Rewards are standardized per call (our choice: the cost model's scale
  differs by task).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from tunebench.listed_space import ListedSpace
from tunebench.methods.annealing import index_digits, place_values
from tunebench.methods.tensor_programs.chameleon.settings import PPOSettings
from tunebench.methods.torch_threads import one_thread

MOVES = np.array([-1, 0, 1])
FEATURE_TABLE_MAX = 1 << 24  # float32 values of a space's whole feature table the explorer keeps (64 MiB)
LOOKUP_MAX = 1 << 24  # product-space size up to which a listed space's moves use a dense index table (128 MiB)


def apply_moves(space, index: int, moves) -> int:
    """The config reached from ``index`` by adding ``moves`` (one of -1, 0, +1 per knob) to the knobs'
    entity indices, each clipped to its knob's range (a pruned space: ``index`` itself when the
    config reached is not in it)."""
    digits = np.clip(np.asarray(space.digits(int(index))) + np.asarray(moves, dtype=np.int64), 0, space.dims - 1)
    if isinstance(space, ListedSpace) and not space.contains_digits(digits):
        return int(index)
    return space.index_of_digits(digits)


def apply_moves_batch(space, indices: np.ndarray, moves: np.ndarray) -> np.ndarray:
    """:func:`apply_moves` for every row: ``indices`` (n,), ``moves`` (n, n_knobs) -> (n,) int64."""
    digits = np.clip(index_digits(space, indices) + moves, 0, space.dims - 1)
    if isinstance(space, ListedSpace):  # a config reached that is not listed: no move
        listed = space.positions(digits)
        return np.where(listed >= 0, listed, np.asarray(indices, dtype=np.int64))
    return digits @ place_values(space)


class Mover:
    """:func:`apply_moves_batch` over a space small enough to hold every config's digits (the same configs
    reached): each knob's place value times its digit after each of the 3 moves is looked up per config and
    summed to the reached config's index in the product space, which a listed space whose product space
    has at most :data:`LOOKUP_MAX` configs finds in a dense table (a larger one: :func:`apply_moves_batch`)."""

    def __init__(self, space):
        self.space, self.n_knobs = space, len(space.knobs)
        self.listed = isinstance(space, ListedSpace)
        self.terms = self.lookup = None
        if self.listed and space.full_size > LOOKUP_MAX:
            return
        digits = index_digits(space, np.arange(space.size))
        place = place_values(space)  # the product space's
        moved = np.clip(digits[:, :, None] + MOVES, 0, (np.asarray(space.dims, dtype=np.int64) - 1)[:, None])
        self.terms = (moved * place[:, None]).reshape(-1)  # [config, knob, move] -> place x digit after it
        if self.listed:
            self.lookup = np.full(space.full_size, -1, dtype=np.int64)
            self.lookup[digits @ place] = np.arange(space.size)

    def step(self, states: np.ndarray, acts: np.ndarray) -> np.ndarray:
        """The configs reached from ``states`` (n,) by ``acts`` (n, n_knobs), each act one of 0, 1, 2 (the
        index into :data:`MOVES`)."""
        if self.terms is None:
            return apply_moves_batch(self.space, states, MOVES[acts])
        at = (states * (3 * self.n_knobs))[:, None] + np.arange(0, 3 * self.n_knobs, 3) + acts
        key = self.terms[at].sum(axis=1)  # the reached config's index in the product space
        if not self.listed:
            return key
        reached = self.lookup[key]
        return np.where(reached >= 0, reached, states)


def in_blocks(policy, x: np.ndarray, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """``policy`` of every row of ``x``, called on blocks of ``rows`` rows (the last one padded with copies of
    the first row)."""
    pad = (-len(x)) % rows
    if pad:
        x = np.concatenate([x, np.repeat(x[:1], pad, axis=0)])
    outs = [policy(x[i:i + rows]) for i in range(0, len(x), rows)]
    n = len(x) - pad
    return np.concatenate([o[0] for o in outs])[:n], np.concatenate([o[1] for o in outs])[:n]


def batch_exact(policy, x: np.ndarray, logits: np.ndarray, values: np.ndarray, rows: int) -> bool:
    """Whether ``policy`` called on any ``rows`` rows of ``x`` gives each row the values of the table
    (``logits``, ``values``: :func:`in_blocks` with ``rows``), probed on ``rows`` rows spread over ``x`` at 5
    shifts. OpenBLAS's float32 product of a row depends on the block's row count and, where that count is not
    a multiple of the kernel's unroll (4 rows here: 100 and 128 pass, 30 and 127 fail), on the row's place in
    the block, not on the other rows."""
    probe = (np.arange(rows) * 7919 + 1) % len(x)
    for shift in (0, 1, 2, 3, rows // 2 + 1):
        at = np.roll(probe, shift)
        got_logits, got_values = policy(x[at])
        if not (np.array_equal(got_logits, logits[at]) and np.array_equal(got_values, values[at])):
            return False
    return True


class ActorCritic(nn.Module):
    """Shared first layer, then an actor head (3 logits per knob) and a critic head (a value)."""

    def __init__(self, n_features: int, n_knobs: int, hidden: int):
        super().__init__()
        self.n_knobs = n_knobs
        self.shared = nn.Sequential(nn.Linear(n_features, hidden), nn.Tanh())
        self.actor = nn.Sequential(nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, 3 * n_knobs))
        self.critic = nn.Sequential(nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, 1))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.shared(x)
        return self.actor(h).view(-1, self.n_knobs, 3), self.critic(h).squeeze(-1)

    def frozen(self) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]:
        """:meth:`forward` with the current weights, in NumPy (float32 in, float32 out): the episodes' many
        small forward passes without PyTorch's per-call overhead."""
        (w0, b0), (w1, b1), (w2, b2), (w3, b3), (w4, b4) = (
            (lin.weight.detach().numpy().T.copy(), lin.bias.detach().numpy().copy())
            for lin in (self.shared[0], self.actor[0], self.actor[2], self.critic[0], self.critic[2]))

        def forward(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            h = np.tanh(x @ w0 + b0)
            logits = (np.tanh(h @ w1 + b1) @ w2 + b2).reshape(-1, self.n_knobs, 3)
            return logits, (np.tanh(h @ w3 + b3) @ w4 + b4)[:, 0]

        return forward


def log_softmax(logits: np.ndarray) -> np.ndarray:
    z = logits - logits.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def chosen_log_prob(logits: np.ndarray, acts: np.ndarray) -> np.ndarray:
    """The log-probability of ``acts`` (one of 3 moves per knob) summed over knobs: ``logits`` (..., n_knobs,
    3) -> (...). The same float32 values as taking :func:`log_softmax`'s entries, written out for 3 moves
    (NumPy's reductions over a length-3 axis of a large array are slow)."""
    z = logits - np.maximum(np.maximum(logits[..., 0], logits[..., 1]), logits[..., 2])[..., None]
    e = np.exp(z)
    chosen = np.take_along_axis(z, acts[..., None], axis=-1)[..., 0]
    return (chosen - np.log(e[..., 0] + e[..., 1] + e[..., 2])).sum(-1)


def log_softmax3(logits: np.ndarray) -> np.ndarray:
    """:func:`log_softmax` over the 3 moves, each entry the float32 value :func:`chosen_log_prob` takes for it."""
    z = logits - np.maximum(np.maximum(logits[..., 0], logits[..., 1]), logits[..., 2])[..., None]
    e = np.exp(z)
    return z - np.log(e[..., 0] + e[..., 1] + e[..., 2])[..., None]


def unique_ints(values: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``np.unique(values, return_index=True, return_inverse=True)`` of config indices in ``[0, size)`` (1-D):
    the same arrays, by marking the configs present instead of sorting where ``size`` is at most 8 x the
    values (0.25 ms against 3.8 ms for 64,000 steps)."""
    if size > 8 * len(values):
        return np.unique(values, return_index=True, return_inverse=True)
    present = np.zeros(size, dtype=bool)
    present[values] = True
    inverse = (np.cumsum(present) - 1)[values]
    first = np.full(int(present.sum()), len(values), dtype=np.int64)
    np.minimum.at(first, inverse, np.arange(len(values)))
    return np.flatnonzero(present), first, inverse


def gae(rewards: np.ndarray, values: np.ndarray, last_value: np.ndarray, gamma: float, lam: float):
    """Advantages and returns [T, B] by generalized advantage estimation (no terminal states)."""
    adv = np.zeros_like(rewards)
    running = np.zeros_like(last_value)
    nxt = last_value
    for t in reversed(range(rewards.shape[0])):
        running = rewards[t] + gamma * nxt - values[t] + gamma * lam * running
        adv[t], nxt = running, values[t]
    return adv, adv + values


class PPOExplorer:
    """The agent and its episodes over ``space`` (module docstring).

    The episodes run on a NumPy copy of the network (it does not change during them); where the space has
    fewer configs than the episodes take steps (and its feature table is held), the copy is run once over
    every config and the steps look its outputs up (:meth:`_episodes_tabled`, the same values). The
    visited configs are scored once, all together, when the episodes end: the reward enters only the
    update. The update evaluates the network once per distinct visited state (episodes revisit states: a
    space of a few thousand configs, 64,000 steps) and spreads the outputs to the steps; the loss is the
    same.
    """

    def __init__(self, space, settings: PPOSettings | None = None, seed: int = 0):
        self.space, self.s = space, settings if settings is not None else PPOSettings()
        torch.manual_seed(seed)
        self.net = ActorCritic(space.n_features, len(space.knobs), self.s.hidden)
        self.opt = torch.optim.Adam(self.net.parameters(), lr=self.s.lr)
        self.rng = np.random.default_rng(seed)
        self._table: np.ndarray | None = None
        self._mover: Mover | None = None

    def _feature_table(self) -> np.ndarray | None:
        """The whole space's feature rows where they are small enough to hold (:data:`FEATURE_TABLE_MAX`
        values; computed on first use), else None."""
        if self._table is None and self.space.size * self.space.n_features <= FEATURE_TABLE_MAX:
            self._table = np.asarray(self.space.features(range(self.space.size)), dtype=np.float32)
        return self._table

    def _features(self, indices) -> np.ndarray:
        """The configs' feature rows, from :meth:`_feature_table` where held, else computed; the same
        float32 rows."""
        if self._feature_table() is not None:
            return self._table[np.asarray(indices, dtype=np.int64)]
        return np.asarray(self.space.features(indices), dtype=np.float32)

    @one_thread()
    def explore(self, starts: list[int], fitness: Callable[[np.ndarray], np.ndarray], steps: int) -> dict[int, float]:
        """Run the episodes, learn from them, and return every visited config with its fitness."""
        n_knobs = len(self.space.knobs)
        seen = np.empty((steps + 1, len(starts)), dtype=np.int64)
        seen[0] = np.asarray(starts, dtype=np.int64)
        acts = np.empty((steps, len(starts), n_knobs), dtype=np.int64)
        noise = self.rng.random((steps, len(starts), n_knobs, 3))  # every step's Gumbel draw: log(-log(u))
        np.log(noise, out=noise)
        np.negative(noise, out=noise)
        np.log(noise, out=noise)
        table = self._policy_table(seen.shape[1], steps)
        logps, vals, last_value = (self._episodes_tabled(seen, acts, noise, *table) if table is not None
                                   else self._episodes(seen, acts, noise))
        rewards, visited = self._score(seen[1:], fitness, self.space.size)
        rewards = (rewards - rewards.mean()) / (rewards.std(ddof=1) + 1e-8)
        adv, ret = gae(rewards, vals, last_value, self.s.gamma, self.s.gae_lambda)
        self._update(seen[:-1].reshape(-1), acts.reshape(-1, n_knobs), logps.reshape(-1), adv.reshape(-1),
                     ret.reshape(-1))
        self.last_states = seen[steps].tolist()
        return visited

    def _episodes(self, seen: np.ndarray, acts: np.ndarray, noise: np.ndarray):
        """The episodes from ``seen[0]``, the network called on every step's states: fills ``seen`` (the
        states, then the states reached) and ``acts``; returns the chosen moves' log-probabilities and the
        values [steps, episodes] and the end states' values."""
        policy, states = self.net.frozen(), seen[0]
        logits = np.empty(noise.shape, dtype=np.float32)
        vals = np.empty(seen[1:].shape, dtype=np.float32)
        for t in range(len(acts)):
            logits[t], vals[t] = policy(self._features(states))
            acts[t] = np.argmax(logits[t] - noise[t], axis=-1)  # Gumbel-max: a draw from softmax(logits)
            states = seen[t + 1] = apply_moves_batch(self.space, states, MOVES[acts[t]])
        return chosen_log_prob(logits, acts), vals, policy(self._features(states))[1]

    def _policy_table(self, batch: int, steps: int) -> tuple[np.ndarray, np.ndarray] | None:
        """The network's (logits, values) of every config of the space, each the float32 values the episodes'
        own calls on ``batch`` rows give it (:func:`batch_exact`); None where the feature table is not held,
        the space has more configs than the episodes take steps, or the values would differ."""
        if self._feature_table() is None or self.space.size > steps * batch:
            return None
        policy = self.net.frozen()
        logits, values = in_blocks(policy, self._table, batch)
        return (logits, values) if batch_exact(policy, self._table, logits, values, batch) else None

    def _episodes_tabled(self, seen: np.ndarray, acts: np.ndarray, noise: np.ndarray, logits: np.ndarray,
                         values: np.ndarray):
        """:meth:`_episodes` with the network's outputs for every config (:meth:`_policy_table`) looked up per
        step: the same moves (:class:`Mover`), the same log-probabilities (:func:`log_softmax3`)."""
        if self._mover is None:
            self._mover = Mover(self.space)
        states = seen[0]
        for t in range(len(acts)):
            acts[t] = np.argmax(logits[states] - noise[t], axis=-1)  # Gumbel-max: a draw from softmax(logits)
            states = seen[t + 1] = self._mover.step(states, acts[t])
        n_knobs = acts.shape[-1]
        chosen = (seen[:-1, :, None] * n_knobs + np.arange(n_knobs)) * 3 + acts  # into the flat table
        return log_softmax3(logits).reshape(-1)[chosen].sum(-1), values[seen[:-1]], values[states]

    @staticmethod
    def _score(reached: np.ndarray, fitness, size: int) -> tuple[np.ndarray, dict[int, float]]:
        """The fitness of every step's reached config (each distinct config scored once) and the visited
        configs with their fitness, in the order they were first reached."""
        flat = reached.reshape(-1)
        uniq, first, inverse = unique_ints(flat, size)
        fit = np.asarray(fitness(uniq), dtype=np.float64)
        order = np.argsort(first)
        return fit[inverse].reshape(reached.shape), dict(zip(uniq[order].tolist(), fit[order].tolist()))

    def _update(self, states, acts, old_logp, adv, ret) -> None:
        uniq, _, inverse = unique_ints(states, self.space.size)
        x = torch.as_tensor(self._features(uniq))
        n_knobs = acts.shape[1]
        chosen = torch.as_tensor((inverse[:, None] * n_knobs + np.arange(n_knobs)) * 3 + acts)  # flat positions
        inverse, old_logp = torch.as_tensor(inverse), torch.as_tensor(old_logp)
        adv, ret = torch.as_tensor(adv, dtype=torch.float32), torch.as_tensor(ret, dtype=torch.float32)
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        for _ in range(self.s.epochs):
            logits, v = self.net(x)
            logp_all = torch.log_softmax(logits, dim=-1)
            entropy = -(logp_all.exp() * logp_all).sum((-1, -2))
            ratio = torch.exp(torch.take(logp_all, chosen).sum(-1) - old_logp)
            policy = -torch.min(ratio * adv, ratio.clamp(1 - self.s.clip, 1 + self.s.clip) * adv).mean()
            loss = (policy + self.s.value_coef * ((v.index_select(0, inverse) - ret) ** 2).mean()
                    - self.s.entropy_coef * entropy.index_select(0, inverse).mean())
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
