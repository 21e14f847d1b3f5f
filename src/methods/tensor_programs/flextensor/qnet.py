"""FlexTensor's direction policy ([Zheng-ASPLOS20] §5.1, "Machine Learning Method"): a Q-network scores
every direction of a point; trained online DQN-style with a target network.

- Network ``X``: four fully connected layers with ReLU between them, width ``hidden`` (64 in FlexTensor's
  code), from the point's features (:meth:`tunebench.search_space.Space.features`) to one Q-value per direction.
- Target network ``Y``: the same structure, a copy of ``X``'s parameters taken at the start and after
  every training (the paper's "backup", after [36] Mnih et al. 2015).
- A transition ``(p, d, e, r)``: from point ``p`` along direction ``d`` to ``e`` with reward ``r``; its
  label is ``r + alpha * max_d' Y(e)[d']`` and the loss ``(X(p)[d] - label)^2`` (mean squared error),
  minimized with AdaDelta.

The network is small (width 64) and trains on minibatches of 32: it runs in NumPy (:class:`MLP`: the same
layers, PyTorch's initialization, PyTorch's AdaDelta update), which spends microseconds per step where
PyTorch's per-call overhead spends about a millisecond.
"""

from __future__ import annotations

import numpy as np
import torch


class MLP:
    """Fully connected layers with ReLU between them, float32 in NumPy, trained by AdaDelta.

    The same computation as ``torch.nn.Sequential(Linear, ReLU, ..., Linear)`` with ``torch.optim.Adadelta``
    (its default ``rho`` 0.9 and ``eps`` 1e-6): the weights are drawn by ``torch.nn.Linear`` (PyTorch's
    initialization and generator, which the harness seeds), then copied.

    Args:
        sizes: layer widths, input first: ``(n_in, h1, ..., n_out)``.
        lr: AdaDelta's step size.
    """

    def __init__(self, sizes: tuple[int, ...], lr: float, rho: float = 0.9, eps: float = 1e-6):
        with torch.no_grad():
            linears = [torch.nn.Linear(a, b) for a, b in zip(sizes, sizes[1:])]
        init = [t.detach().numpy().T.astype(np.float32) for lin in linears for t in (lin.weight, lin.bias)]
        self.sizes, self.lr, self.rho, self.eps = tuple(sizes), float(lr), float(rho), float(eps)
        # every parameter (and its AdaDelta state) is a view into one flat buffer: the update is elementwise,
        # so it runs once over the buffer instead of once per tensor, with the same float32 results
        self._flat, self.params = _flat_views(init)
        self._square_flat, self.square_avg = _flat_views([np.zeros_like(p) for p in init])
        self._acc_flat, self.acc_delta = _flat_views([np.zeros_like(p) for p in init])
        self._grad_flat, self._grads = _flat_views([np.zeros_like(p) for p in init])

    def copy_from(self, other: MLP) -> None:
        self._flat[:] = other._flat

    def _activations(self, x: np.ndarray) -> list[np.ndarray]:
        acts = [np.asarray(x, dtype=np.float32)]
        last = len(self.params) // 2 - 1
        for i in range(last + 1):
            z = acts[-1] @ self.params[2 * i] + self.params[2 * i + 1]
            acts.append(z if i == last else np.maximum(z, 0.0))
        return acts

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """The outputs, shape (n, n_out)."""
        return self._activations(x)[-1]

    def step(self, x: np.ndarray, column: np.ndarray, target: np.ndarray) -> float:
        """One AdaDelta step on the mean squared error of output ``column[i]`` of row ``i`` against
        ``target[i]``; the loss before the step."""
        acts = self._activations(x)
        rows = np.arange(len(column))
        diff = acts[-1][rows, column] - target
        grad_out = np.zeros_like(acts[-1])
        grad_out[rows, column] = 2.0 * diff / len(diff)
        for i in reversed(range(len(self.params) // 2)):
            self._grads[2 * i + 1][...] = grad_out.sum(axis=0)
            np.matmul(acts[i].T, grad_out, out=self._grads[2 * i])
            if i:
                grad_out = (grad_out @ self.params[2 * i].T) * (acts[i] > 0)
        g, sq, acc = self._grad_flat, self._square_flat, self._acc_flat
        sq *= self.rho
        sq += (1 - self.rho) * g * g
        delta = np.sqrt(acc + self.eps) / np.sqrt(sq + self.eps) * g
        acc *= self.rho
        acc += (1 - self.rho) * delta * delta
        self._flat -= self.lr * delta
        return float(np.mean(diff * diff))


def _flat_views(arrays: list[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
    """One float32 buffer holding ``arrays`` one after another, and a view of it shaped like each."""
    flat = np.concatenate([a.reshape(-1) for a in arrays]).astype(np.float32)
    views, at = [], 0
    for a in arrays:
        views.append(flat[at:at + a.size].reshape(a.shape))
        at += a.size
    return flat, views


def q_network(n_features: int, n_actions: int, hidden: int, lr: float = 0.02) -> MLP:
    """Four linear layers, ReLU between them: ``n_features -> hidden -> hidden -> hidden -> n_actions``."""
    return MLP((n_features, hidden, hidden, hidden, n_actions), lr=lr)


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
        self.x = q_network(n_features, n_actions, hidden, lr)
        self.y = q_network(n_features, n_actions, hidden, lr)
        self.y.copy_from(self.x)
        self.alpha, self.epochs, self.batch_size, self.memory = alpha, epochs, batch_size, memory
        self.transitions: list[tuple[np.ndarray, int, np.ndarray, float]] = []

    def q_values(self, features: np.ndarray) -> np.ndarray:
        """``X``'s Q-values, shape (n_points, n_actions)."""
        return self.x(features)

    def remember(self, p: np.ndarray, action: int, e: np.ndarray, reward: float) -> None:
        self.transitions.append((p, int(action), e, float(reward)))
        del self.transitions[:-self.memory]

    def train(self, rng: np.random.Generator) -> float:
        """Train ``X`` on the remembered transitions, then copy it into ``Y``; the last epoch's mean loss."""
        if not self.transitions:
            return float("nan")
        p = np.stack([t[0] for t in self.transitions]).astype(np.float32)
        a = np.array([t[1] for t in self.transitions], dtype=np.int64)
        e = np.stack([t[2] for t in self.transitions]).astype(np.float32)
        r = np.array([t[3] for t in self.transitions], dtype=np.float32)
        labels = r + np.float32(self.alpha) * self.y(e).max(axis=1)
        loss_sum = 0.0
        for _ in range(self.epochs):
            order = rng.permutation(len(labels))
            loss_sum = 0.0
            for start in range(0, len(order), self.batch_size):
                idx = order[start:start + self.batch_size]
                loss_sum += self.x.step(p[idx], a[idx], labels[idx]) * len(idx)
        self.y.copy_from(self.x)
        return loss_sum / len(labels)
