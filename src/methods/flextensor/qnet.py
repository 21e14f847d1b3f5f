"""FlexTensor's direction policy ([Zheng-ASPLOS20] §5.1, "Machine Learning Method"): a Q-network scores
every direction of a point; trained online DQN-style with a target network.

- Network ``X``: four fully connected layers with ReLU between them, width ``hidden`` (64 in FlexTensor's
  code), from the point's features (:meth:`tunebench.space.Space.features`) to one Q-value per direction.
- Target network ``Y``: the same structure, a copy of ``X``'s parameters taken at the start and after
  every training (the paper's "backup", after [36] Mnih et al. 2015).
- A transition ``(p, d, e, r)``: from point ``p`` along direction ``d`` to ``e`` with reward ``r``; its
  label is ``r + alpha * max_d' Y(e)[d']`` and the loss ``(X(p)[d] - label)^2`` (mean squared error),
  minimized with AdaDelta.

The network is small (width 64): it trains and predicts on one PyTorch thread
(:mod:`tunebench.methods.torch_threads`).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from tunebench.methods.torch_threads import one_thread


def q_network(n_features: int, n_actions: int, hidden: int) -> nn.Sequential:
    """Four linear layers, ReLU between them: ``n_features -> hidden -> hidden -> hidden -> n_actions``."""
    return nn.Sequential(nn.Linear(n_features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, n_actions))


class DirectionPolicy:
    """The Q-network ``X``, its target network ``Y`` and the transitions they learn from.

    Args:
        n_features: length of a point's feature vector.
        n_actions: number of directions.
        hidden: layer width.
        alpha: weight of the next point's best target Q-value in a label.
        lr: AdaDelta step size.
        epochs: passes over the transitions per training.
        batch_size: transitions per gradient step.
        memory: most recent transitions kept (and trained on).
    """

    def __init__(self, n_features: int, n_actions: int, hidden: int = 64, alpha: float = 0.9, lr: float = 0.02,
                 epochs: int = 20, batch_size: int = 32, memory: int = 1000):
        self.x = q_network(n_features, n_actions, hidden)
        self.y = q_network(n_features, n_actions, hidden)
        self.y.load_state_dict(self.x.state_dict())
        self.alpha, self.epochs, self.batch_size, self.memory = alpha, epochs, batch_size, memory
        self.opt = torch.optim.Adadelta(self.x.parameters(), lr=lr)
        self.transitions: list[tuple[np.ndarray, int, np.ndarray, float]] = []

    def q_values(self, features: np.ndarray) -> np.ndarray:
        """``X``'s Q-values, shape (n_points, n_actions)."""
        with torch.no_grad(), one_thread():
            return self.x(torch.as_tensor(np.asarray(features, dtype=np.float32))).numpy()

    def remember(self, p: np.ndarray, action: int, e: np.ndarray, reward: float) -> None:
        self.transitions.append((p, int(action), e, float(reward)))
        del self.transitions[:-self.memory]

    @one_thread()
    def train(self, rng: np.random.Generator) -> float:
        """Train ``X`` on the remembered transitions, then copy it into ``Y``; the last epoch's mean loss."""
        if not self.transitions:
            return float("nan")
        p = torch.as_tensor(np.stack([t[0] for t in self.transitions]), dtype=torch.float32)
        a = torch.as_tensor([t[1] for t in self.transitions])
        e = torch.as_tensor(np.stack([t[2] for t in self.transitions]), dtype=torch.float32)
        r = torch.as_tensor([t[3] for t in self.transitions], dtype=torch.float32)
        with torch.no_grad():
            labels = r + self.alpha * self.y(e).max(dim=1).values
        loss_sum = 0.0
        for _ in range(self.epochs):
            order = torch.as_tensor(rng.permutation(len(labels)))
            loss_sum = 0.0
            for start in range(0, len(order), self.batch_size):
                idx = order[start:start + self.batch_size]
                pred = self.x(p[idx]).gather(1, a[idx, None]).squeeze(1)
                loss = ((pred - labels[idx]) ** 2).mean()
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
                loss_sum += loss.item() * len(idx)
        self.y.load_state_dict(self.x.state_dict())
        return loss_sum / len(labels)
