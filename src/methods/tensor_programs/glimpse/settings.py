"""``method=glimpse``'s hyperparameters ([Ahn-PhD] Ch. 4; docs/METHODS.md §glimpse). No PyTorch or TVM
import here, except that a ``pretrained`` file is read (PyTorch, weights only) to check it in the preflight."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from tunebench.config.experiment import MethodSettings
from tunebench.config.knobs import FRACTION, NAME, NONNEG_INT, POS_INT, choice, join, knob, opt
from tunebench.errors import UserError
from tunebench.methods.pretrained import pretrained_problem


@dataclass
class GlimpseSettings(MethodSettings):
    """Glimpse: Blueprint prior, meta-learned acquisition steering simulated annealing, validity ensemble."""

    name: str = knob("glimpse", NAME, "the method")
    pretrained: str | None = knob(
        None, opt(NAME), "model file of `python -m tunebench glimpse train` (Blueprint PCA, prior generator, "
                         "acquisition, validity ensemble); null = none of the three: uniform prior, expected "
                         "improvement instead of the learned acquisition, no validity filter (plain GP-BO with SA)")
    blueprint: str = knob("spec", choice("spec", "constant"),
                          "spec = the hardware's Blueprint ([Ahn-PhD] §4.4.1); constant = the ablation: Θ = 0. It must "
                          "match how method.pretrained was trained (constant: with --constant-blueprint); a model "
                          "trained the other way, or constant without a model, is refused before the run")
    use_prior: bool = knob(True, None, "initial samples from H's prior ([Ahn-PhD] §4.4.1, Algorithm 4 line 4)")
    use_acquisition: bool = knob(True, None, "the meta-learned acquisition picks the measured configs from SA's "
                                             "candidates ([Ahn-PhD] §4.4.2, Algorithm 4 line 8); false = expected "
                                             "improvement")
    use_validity: bool = knob(True, None, "the validity ensemble rejects candidates ([Ahn-PhD] §4.4.3, Algorithm 4 "
                                          "line 10)")
    tau: float = knob(1 / 3, FRACTION, "reject a config when more than tau of the per-knob predictors vote invalid "
                                       "([Ahn-PhD] §4.4.3, footnote 2: tau = 1/3 by grid search)")
    init_samples: int = knob(8, POS_INT, "ours: configs of the first round, the prior's most probable combinations of "
                                         "per-knob argmaxes ([Ahn-PhD] §4.4.1: 'enumerates combinations of the "
                                         "argmax(f_k), weighted by the product of f_k'); the thesis gives no count")
    candidates: int = knob(64, POS_INT, "ours: SA's best predicted unvisited configs the acquisition chooses from")
    random_candidates: int = knob(0, NONNEG_INT, "random unvisited configs added to SA's for the acquisition; 0 = "
                                                 "Algorithm 4 as written (the meta-optimizer prunes SA's output). Ours, "
                                                 "an option: MetaBO scores its acquisition over the domain [Volpp-ICLR20] "
                                                 "and its meta-training episodes here are random sets (docs/RESULTS.md "
                                                 "§Glimpse measures 64)")
    sa_n_iter: int = knob(500, POS_INT, "SA steps on the surrogate mean per round (AutoTVM's SA default; Glimpse "
                                        "steers AutoTVM's annealing chains, [Ahn-PhD] §4.4.2)")
    sa_parallel_size: int = knob(128, POS_INT, "SA Markov chains (AutoTVM's default)")
    sa_early_stop: int = knob(50, POS_INT, "SA stops 50 steps after its top list last changed (AutoTVM's default)")
    max_rejects: int = knob(4, POS_INT, "ours: a round tries at most this many candidate lists before it measures "
                                        "configs the ensemble rejected (never an empty round)")

    def check(self, prefix: str) -> None:
        """A ``pretrained`` file is an existing, readable Glimpse model trained for ``blueprint``'s mode;
        ``blueprint=constant`` needs one (without a model there is no Blueprint to hold constant).
        Checked before the run exists."""
        if self.pretrained is None:
            if self.blueprint == "constant":
                raise UserError(f"{join(prefix, 'blueprint')}=constant needs {join(prefix, 'pretrained')}: a model "
                                "trained with `python -m tunebench glimpse train --constant-blueprint`")
            return
        from tunebench.methods.tensor_programs.glimpse.model import TRAIN_HINT

        problem = pretrained_problem(self.pretrained, TRAIN_HINT,
                                     lambda path, stamp: _model_problem(path, stamp, self.blueprint))
        if problem:
            raise UserError(f"{join(prefix, 'pretrained')}={self.pretrained}: {problem}")


@functools.lru_cache(maxsize=8)
def _model_problem(path: str, stamp: tuple, blueprint: str) -> str | None:
    from tunebench.methods.tensor_programs.glimpse.model import model_problem

    return model_problem(path, blueprint)
