"""``method=dgp``'s hyperparameters: deep Gaussian process transfer learning ([Sun-ICCV21]; [Sun-PhD] Ch. 4;
docs/METHODS.md §dgp). "ours" = the papers are silent; our choice.
"""

from __future__ import annotations

from dataclasses import dataclass

from tunebench.config.experiment import MethodSettings
from tunebench.config.knobs import NAME, NONNEG_INT, NONNEG_NUM, POS_INT, POS_NUM, bad, choice, knob, opt, rule
from tunebench.methods.tensor_programs.autotvm.settings import AutoTVMSettings, _temp

TUNING_SETS = ("dgp", "random")


@dataclass
class DGPSettings(MethodSettings):
    """Deep GP transfer: source layers tuned by AutoTVM, a deep GP pre-trained on their records, a tuning set
    for the MAP transfer, and AutoTVM's simulated annealing on the tuned DGP (src/methods/tensor_programs/dgp/method.py)."""

    name: str = knob("dgp", NAME, "the method")
    source_tuner: AutoTVMSettings = knob(
        factory=AutoTVMSettings, check=rule(lambda v: isinstance(v, AutoTVMSettings), "must be autotvm's settings"),
        doc="[Sun-ICCV21] §4.2: \"the first layer of each group is deployed via AutoTVM\"; the autotvm settings "
            "(AutoTVMSettings in src/methods/tensor_programs/autotvm/settings.py) of the method that tunes source layers")
    history: str | None = knob(None, opt(rule(lambda v: isinstance(v, str) and v.strip() != "",
                                              "must be a record file, run folder or MLflow run id (or a "
                                              "comma-separated list of them)")),
                               "records to transfer from: a record file, a run folder or an MLflow run id (or a "
                               "comma-separated list). null: each group's first layer is tuned with source_tuner "
                               "([Sun-ICCV21] §4.2); docs/METHODS.md §dgp step 2")
    pretrained: str | None = knob(None, opt(rule(lambda v: isinstance(v, str) and v.strip() != "",
                                                 "must be a file written by dgp's preparation")),
                                  "a file of the DGP pre-trained on this run's source records (written by "
                                  "`python -m tunebench suite --methods ...,dgp`), read before the run's first "
                                  "task: the pre-training is a preparation on no task's clock. null: pre-train "
                                  "in the task's setup, on its clock (pretrain_s)")
    # ---- deep GP ([Sun-ICCV21] §3.2-3.3, §4.1) ----
    hidden_dims: int = knob(4, POS_INT, "the paper is silent; ours: 4, the smallest of a 4-8 range -- the inputs "
                                        "have 8-20 features; 2 GP layers (docs/METHODS.md §dgp step 3)")
    num_inducing: int = knob(128, POS_INT, "[Sun-ICCV21] §4.1: \"The number of inducing points in variational "
                                           "inference is 128\"")
    pretrain_epochs: int = knob(100, POS_INT, "ours (the paper is silent): 100 Adam epochs of doubly-stochastic VI; "
                                              "the ELBO loss has flattened by then on VGG-16/ResNet-18 histories "
                                              "of a few hundred records")
    pretrain_lr: float = knob(0.01, POS_NUM, "ours: GPyTorch's deep GP example value")
    batch_size: int = knob(256, POS_INT, "ours: minibatch rows per Adam step (pre-training and MAP)")
    train_samples: int = knob(8, POS_INT, "ours: Monte-Carlo samples propagated through the layers per step "
                                          "(GPyTorch example: 10)")
    max_history: int = knob(5000, POS_INT, "ours: at most this many history records (random subset) -- bounds "
                                           "pre-training time")
    # ---- tuning set ([Sun-ICCV21] §3.4, §4.4) ----
    pool_size: int = knob(10000, POS_INT, "ours (docs/METHODS.md §dgp step 4); [Sun-ICCV21]: \"a set which is "
                                          "large enough\"")
    tuning_set_size: int = knob(300, POS_INT, "[Sun-ICCV21] §4.3: \"the tuning set contains 300 configurations\" "
                                              "(s)")
    tuning_set: str = knob("dgp", choice(*TUNING_SETS), "dgp = top s of the pool by DGP mean ([Sun-ICCV21] §3.4); "
                                                        "random = the ablation of Fig. 7")
    # ---- MAP transfer ([Sun-ICCV21] Eq. 6) ----
    map_l2: float = knob(0.01, NONNEG_NUM, "λ; the paper is silent -- ours. The objective is ELBO/N - λ||θ - θ̃||² "
                                           "over GPyTorch's raw parameters (a few thousand numbers), so λ = 0.01 "
                                           "lets θ move but keeps it near θ̃")
    map_epochs: int = knob(50, POS_INT, "ours: Adam epochs on the tuning set")
    map_lr: float = knob(0.01, POS_NUM, "ours: as pre-training")
    # ---- search with the tuned DGP ([Sun-ICCV21] §3.2: simulated annealing is the search; §4.1: the same
    #      settings as AutoTVM) ----
    predict_samples: int = knob(16, POS_INT, "ours: draws averaged for the DGP mean (fixed seed, so SA sees a "
                                             "deterministic score)")
    top_k: int = knob(64, POS_INT, "ours (docs/METHODS.md §dgp step 6): AutoTVM's plan size -- the SA's 64 best "
                                   "configs are measured and the best measured one is the result")
    sa_n_iter: int = knob(500, NONNEG_INT, "AutoTVM SA (AutoTVMSettings.sa_n_iter): max steps")
    sa_parallel_size: int = knob(128, POS_INT, "AutoTVM SA: parallel chains")
    sa_temp: list[float] = knob([1.0, 0.0], rule(_temp, "must be [start, end] temperatures"),
                                "AutoTVM SA: linear cooling")
    sa_early_stop: int = knob(50, POS_INT, "AutoTVM SA: stop 50 steps after the top-k heap last changed")

    def check(self, prefix: str) -> None:
        if self.source_tuner.name != "autotvm":
            raise bad(f"{prefix}.source_tuner.name", self.source_tuner.name,
                      "valid: autotvm (source layers are tuned with AutoTVM; source_tuner holds its settings)")
