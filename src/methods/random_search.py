"""``method=random``: uniform sampling without replacement (docs/METHODS.md §random)."""

from __future__ import annotations

from tunebench.methods.base import Method
from tunebench.space import Config


class RandomSearch(Method):
    """Draws configs uniformly at random from the space, never one already measured."""

    name = "random"

    def ask(self, n: int) -> list[Config]:
        indices = self.space.sample(self.rng, n, exclude=self.visited)
        self.visited.update(indices)
        return [self.space.get(i) for i in indices]
