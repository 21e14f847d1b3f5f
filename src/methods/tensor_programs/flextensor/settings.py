"""``method=flextensor``'s hyperparameters: FlexTensor ([Zheng-ASPLOS20] §5.1; docs/METHODS.md §flextensor),
simulated-annealing start points and a Q-network choosing the direction of the next move in the rearranged
space. Made for the template-free spaces::

    python run.py method=flextensor model=ops model.operators=[c2d] target.template=flex

(any knob space works). Values marked "code" are those of FlexTensor's published implementation
(github.com/pku-liang/FlexTensor); the paper names the parameters but gives no values.
"""

from __future__ import annotations

from dataclasses import dataclass

from tunebench.config.experiment import MethodSettings
from tunebench.config.knobs import FRACTION, NAME, NONNEG_NUM, POS_INT, bad, choice, knob

POLICIES = ("q", "p")


@dataclass
class FlexTensorSettings(MethodSettings):
    """FlexTensor's exploration (src/methods/tensor_programs/flextensor/tuner.py)."""

    name: str = knob("flextensor", NAME, "the method")
    policy: str = knob("q", choice(*POLICIES), "q: the Q-method (one direction per start point, §5.1); p: the "
                                               "P-method (every direction, §6.5)")
    n_init: int = knob(20, POS_INT, "random points measured before the first trial (code: 10 x 20 in its Q mode; "
                                    "one epoch here)")
    n_starts: int = knob(2, POS_INT, "start points per trial, one new point each (Q-method) (code: "
                                     "Scheduler(parallel=2))")
    gamma: float = knob(0.5, NONNEG_NUM, "§5.1 start-point rule exp(-gamma (T - T*) / T*) (code: 0.5, applied to "
                                         "the time)")
    alpha: float = knob(0.9, NONNEG_NUM, "§5.1 label r + alpha * max Y(e) (code: 0.9)")
    train_every: int = knob(5, POS_INT, "§5.1: the Q-network trains \"every five trials\"")
    eps_start: float = knob(0.8, FRACTION, "code: epsilon-greedy directions, epsilon = max(0.8 exp(-0.01 trial), "
                                           "0.1): its start")
    eps_decay: float = knob(0.01, NONNEG_NUM, "code: epsilon's decay rate per trial (0.01)")
    eps_min: float = knob(0.1, FRACTION, "code: epsilon's floor (0.1); at most eps_start")
    lr: float = knob(0.02, NONNEG_NUM, "§5.1 AdaDelta (code: lr 0.02)")
    epochs: int = knob(20, POS_INT, "code: 20 epochs per training")
    batch_size: int = knob(32, POS_INT, "code: a gradient step every 32 transitions")
    memory: int = knob(1000, POS_INT, "code: trains on at most 1000 transitions")
    hidden: int = knob(64, POS_INT, "§5.1: four fully connected layers (code: width 64)")

    def check(self, prefix: str) -> None:
        if self.eps_min > self.eps_start:
            raise bad(f"{prefix}.eps_min", self.eps_min,
                      f"need 0 <= eps_min <= eps_start <= 1 (eps_start={self.eps_start!r})")
