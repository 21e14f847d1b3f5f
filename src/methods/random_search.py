"""``method=random``: uniform sampling without replacement (docs/METHODS.md §random). No hyperparameters."""

from __future__ import annotations

from dataclasses import dataclass

from tunebench.config.experiment import MethodSettings
from tunebench.config.knobs import NAME, knob
from tunebench.methods.base import Method
from tunebench.search_space import Config


@dataclass
class RandomSettings(MethodSettings):
    """Uniform random sampling without replacement: no hyperparameters."""

    name: str = knob("random", NAME, "the method")


class RandomSearch(Method):
    """Draws configs uniformly at random from the space, never one already measured."""

    name = "random"
    Settings = RandomSettings

    def ask(self, n: int) -> list[Config]:
        indices = self.space.sample(self.rng, n, exclude=self.visited)
        self.visited.update(indices)
        return [self.space.get(i) for i in indices]
