"""``method=chameleon``'s hyperparameters: CHAMELEON ([Ahn-PhD] Ch. 2; Ahn et al., ICLR 2020; docs/METHODS.md
§chameleon), AutoTVM's cost model with adaptive exploration (a PPO agent) and adaptive sampling (k-means at the
knee + sample synthesis).

Everything of AutoTVM (cost model, SA, ``plan_size`` = b_GBT, ``eps_greedy``) is inherited from
:class:`~tunebench.methods.tensor_programs.autotvm.settings.AutoTVMSettings`; the ablations of the thesis's Fig. 2.7-2.8 and
Tables 2.8-2.9 are ``method.explorer=sa|rl`` x ``method.sampling=greedy|adaptive`` (sa + greedy is AutoTVM
with ``loss_type`` reg).
"""

from __future__ import annotations

from dataclasses import dataclass

from tunebench.config.knobs import (
    FRACTION,
    NAME,
    NONNEG_NUM,
    POS_INT,
    POS_NUM,
    Settings,
    choice,
    is_int,
    is_num,
    knob,
    rule,
)
from tunebench.methods.tensor_programs.autotvm.settings import AutoTVMSettings


@dataclass
class PPOSettings(Settings):
    """The PPO agent of the adaptive exploration: [Ahn-PhD] Table 2.4 (``hidden``: ours, the thesis gives no
    width)."""

    lr: float = knob(1e-3, POS_NUM, "[Ahn-PhD] Table 2.4: Adam step size")
    gamma: float = knob(0.9, FRACTION, "[Ahn-PhD] Table 2.4: discount factor")
    gae_lambda: float = knob(0.99, FRACTION, "[Ahn-PhD] Table 2.4: GAE parameter")
    epochs: int = knob(3, POS_INT, "[Ahn-PhD] Table 2.4: epochs per update")
    clip: float = knob(0.3, POS_NUM, "[Ahn-PhD] Table 2.4: clipping parameter")
    value_coef: float = knob(1.0, NONNEG_NUM, "[Ahn-PhD] Table 2.4: value coefficient")
    entropy_coef: float = knob(0.1, NONNEG_NUM, "[Ahn-PhD] Table 2.4: entropy coefficient")
    hidden: int = knob(64, POS_INT, "ours (the thesis gives no width): width of the shared layer and of each "
                                    "head's hidden layer")


def _k_range(k) -> bool:
    return isinstance(k, (list, tuple)) and len(k) == 2 and all(is_int(v) for v in k) and 1 <= k[0] < k[1]


@dataclass
class ChameleonSettings(AutoTVMSettings):
    """CHAMELEON's own settings on top of AutoTVM's (module docstring)."""

    name: str = knob("chameleon", NAME, "the method")
    loss_type: str = knob("reg", choice("rank", "reg"),
                          "[Ahn-PhD] Table 2.2 (mode_GBT = xgb-reg): the cost model's reward is its regression")
    explorer: str = knob("rl", choice("rl", "sa"), "rl: adaptive exploration (§2.4.2); sa: AutoTVM's simulated "
                                                   "annealing (ablation)")
    sampling: str = knob("adaptive", choice("adaptive", "greedy"),
                         "adaptive: Algorithm 1 + sample synthesis (§2.4.3); greedy: AutoTVM's top plan (ablation)")
    iteration_opt: int = knob(16, POS_INT, "[Ahn-PhD] Table 2.2: iterations per task (\"equivalent to 1000 "
                                           "hardware measurements\"); the first is AutoTVM's random plan of "
                                           "plan_size")
    episode_rl: int = knob(128, POS_INT, "[Ahn-PhD] Table 2.2: episodes (run in parallel) per iteration")
    step_rl: int = knob(500, POS_INT, "[Ahn-PhD] Table 2.2: steps per episode")
    threshold_meta: float = knob(2.5, rule(lambda v: is_num(v) and v >= 1, "must be a number >= 1"),
                                 "[Ahn-PhD] Table 2.2: the meta-search exits at the first k with 2.5 x loss >= "
                                 "previous loss")
    k_range: list[int] = knob([8, 64], rule(_k_range, "must be [lo, hi] with 1 <= lo < hi (integers)"),
                              "[Ahn-PhD] Algorithm 1: for k in range(8, 64)")
    ppo: PPOSettings = knob(factory=PPOSettings, doc="[Ahn-PhD] Table 2.4: the PPO agent (hidden: ours, the thesis "
                                                     "gives no width)")
