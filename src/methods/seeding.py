"""Seeding the libraries a method uses from the run's generator.

A method must be a deterministic function of the run's seed: its own draws come from the generator
the harness hands to ``setup``, and the libraries that keep a process-wide generator (PyTorch's module
initialization and ``torch.randn``, e.g. GPyTorch's kernel parameters and ``torch.nn.Linear`` weights;
NumPy's legacy ``np.random``; Python's ``random``) are seeded from it before the method builds
anything. Libraries that take a seed argument (XGBoost, scikit-learn, Optuna samplers, k-means) get
one drawn from the same generator by the method itself.
"""

from __future__ import annotations

import random

import numpy as np


def library_seed(rng: np.random.Generator) -> int:
    """A 63-bit seed derived from ``rng`` without advancing it (a spawned child generator's first
    draw), so the method's own stream of draws is the same with or without library seeding."""
    return int(rng.spawn(1)[0].integers(2**63))


def seed_libraries(seed: int) -> None:
    """Seed the process-wide generators of Python, NumPy and PyTorch with ``seed``."""
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
