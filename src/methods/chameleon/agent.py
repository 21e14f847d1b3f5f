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

from tunebench.methods.annealing import index_digits, place_values
from tunebench.methods.chameleon.settings import PPOSettings
from tunebench.methods.torch_threads import one_thread
from tunebench.space import ExplicitSpace

MOVES = np.array([-1, 0, 1])


def apply_moves(space, index: int, moves) -> int:
    """The config reached from ``index`` by adding ``moves`` (one of -1, 0, +1 per knob) to the knobs'
    entity indices, each clipped to its knob's range (a pruned space: ``index`` itself when the
    config reached is not in it)."""
    digits = np.clip(np.asarray(space.digits(int(index))) + np.asarray(moves, dtype=np.int64), 0, space.dims - 1)
    if isinstance(space, ExplicitSpace) and not space.contains_digits(digits):
        return int(index)
    return space.index_of_digits(digits)


def apply_moves_batch(space, indices: np.ndarray, moves: np.ndarray) -> np.ndarray:
    """:func:`apply_moves` for every row: ``indices`` (n,), ``moves`` (n, n_knobs) -> (n,) int64."""
    digits = np.clip(index_digits(space, indices) + moves, 0, space.dims - 1)
    if isinstance(space, ExplicitSpace):  # a config reached that is not listed: no move
        listed = space.positions(digits)
        return np.where(listed >= 0, listed, np.asarray(indices, dtype=np.int64))
    return digits @ place_values(space)


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


def gae(rewards: torch.Tensor, values: torch.Tensor, last_value: torch.Tensor, gamma: float, lam: float):
    """Advantages and returns [T, B] by generalized advantage estimation (no terminal states)."""
    T = rewards.shape[0]
    adv = torch.zeros_like(rewards)
    running = torch.zeros_like(last_value)
    for t in reversed(range(T)):
        nxt = last_value if t == T - 1 else values[t + 1]
        delta = rewards[t] + gamma * nxt - values[t]
        running = delta + gamma * lam * running
        adv[t] = running
    return adv, adv + values


class PPOExplorer:
    """The agent and its episodes over ``space`` (module docstring)."""

    def __init__(self, space, settings: PPOSettings | None = None, seed: int = 0):
        self.space, self.s = space, settings if settings is not None else PPOSettings()
        torch.manual_seed(seed)
        self.net = ActorCritic(space.n_features, len(space.knobs), self.s.hidden)
        self.opt = torch.optim.Adam(self.net.parameters(), lr=self.s.lr)

    def _features(self, indices) -> torch.Tensor:
        return torch.as_tensor(self.space.features(indices), dtype=torch.float32)

    @one_thread()
    def explore(self, starts: list[int], fitness: Callable[[list[int]], np.ndarray], steps: int) -> dict[int, float]:
        """Run the episodes, learn from them, and return every visited config with its fitness."""
        states, visited = list(starts), {}
        obs, acts, logps, vals, rews = [], [], [], [], []
        for _ in range(steps):
            x = self._features(states)
            with torch.no_grad():
                logits, v = self.net(x)
                dist = torch.distributions.Categorical(logits=logits)
                a = dist.sample()
            nxt = apply_moves_batch(self.space, np.asarray(states, dtype=np.int64), MOVES[a.numpy()]).tolist()
            r = np.asarray(fitness(np.asarray(nxt, dtype=np.int64)), dtype=np.float64)
            visited.update(zip(nxt, r.tolist()))
            obs.append(x), acts.append(a), logps.append(dist.log_prob(a).sum(-1)), vals.append(v)
            rews.append(torch.as_tensor(r, dtype=torch.float32))
            states = nxt
        with torch.no_grad():
            last = self.net(self._features(states))[1]
        rewards = torch.stack(rews)
        rewards = (rewards - rewards.mean()) / (rewards.std() + 1e-8)
        adv, ret = gae(rewards, torch.stack(vals), last, self.s.gamma, self.s.gae_lambda)
        self._update(torch.cat(obs), torch.cat(acts), torch.cat(logps), adv.flatten(), ret.flatten())
        self.last_states = states
        return visited

    def _update(self, obs, acts, old_logp, adv, ret) -> None:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        for _ in range(self.s.epochs):
            logits, v = self.net(obs)
            dist = torch.distributions.Categorical(logits=logits)
            ratio = torch.exp(dist.log_prob(acts).sum(-1) - old_logp)
            policy = -torch.min(ratio * adv, ratio.clamp(1 - self.s.clip, 1 + self.s.clip) * adv).mean()
            loss = policy + self.s.value_coef * ((v - ret) ** 2).mean() - self.s.entropy_coef * dist.entropy().sum(-1).mean()
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
